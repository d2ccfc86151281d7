"""The replay server that ``make run REPLAY=1`` uses answers with the recorded bytes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from devtools.replay_server import RecordedServices, ReplayServer, service_env


@pytest.fixture(scope="module")
def services(shared_data):
    return RecordedServices.load(shared_data)


def test_oai_list_records_is_the_recorded_page_and_its_token_ends_the_list(services, shared_data):
    oai = shared_data / "arxiv" / "oai"
    first = services.respond("GET", "/oai", "verb=ListRecords&metadataPrefix=arXivRaw&set=cs&from=2026-11-20&until=2026-11-20")
    assert first.status == 200 and first.body == (oai / "saelim2015_ListRecordsResponse.xml").read_bytes()
    nxt = services.respond("GET", "/oai", "verb=ListRecords&resumptionToken=726959%7C1001")
    assert nxt.body == (oai / "saelim2015_ErrorResponseNoRecordsMatch.xml").read_bytes()
    rec = services.respond("GET", "/oai", "verb=GetRecord&metadataPrefix=arXivRaw&identifier=oai:arXiv.org:1302.2146")
    assert rec.body == (oai / "saelim2015_GetRecordResponse.xml").read_bytes()
    missing = services.respond("GET", "/oai", "verb=GetRecord&metadataPrefix=arXivRaw&identifier=oai:arXiv.org:0813.2274")
    assert missing.body == (oai / "saelim2015_ErrorResponseIdDoesNotExist.xml").read_bytes()


def test_arxiv_api_pdfs_and_s2_answer_their_recordings(services, shared_data):
    api = shared_data / "arxiv" / "api"
    hit = services.respond("GET", "/api/query", "id_list=astro-ph/0601001&start=0&max_results=100")
    assert hit.body == (api / "arxivpy2026_id_list_astro-ph_0601001.xml").read_bytes()
    assert services.respond("GET", "/api/query", "id_list=9912.99999").body == \
        (api / "arxivpy2026_id_list_0000.0000_empty.xml").read_bytes()
    assert services.respond("GET", "/api/query", "id_list=abc").status == 400
    pdf = services.respond("GET", "/pdf/1706.03762v5")
    assert pdf.body == (shared_data / "arxiv" / "pdf" / "1706.03762.pdf").read_bytes()
    assert services.respond("GET", "/pdf/0704.0471").status == 404

    body = json.dumps({"ids": ["CorpusId:211530585", "CorpusId:470667", "10.2139/ssrn.2250500",
                               "0f40b1f08821e22e859c6050916cec3667778613"]}).encode()
    batch = services.respond("POST", "/s2/graph/v1/paper/batch", "fields=title,year", body)
    assert batch.status == 200 and json.loads(batch.body)[0] is None and json.loads(batch.body)[1]["paperId"]
    unknown = services.respond("POST", "/s2/graph/v1/paper/batch", "fields=title", b'{"ids": ["ARXIV:0704.0471", "x"]}')
    assert json.loads(unknown.body) == [None, None]
    gone = services.respond("GET", "/s2/graph/v1/paper/ARXIV:0704.0471", "fields=title")
    assert gone.status == 404 and "not found" in json.loads(gone.body)["error"]


def test_http_server_serves_the_same_answers(shared_data):
    with ReplayServer(shared_data) as srv:
        env = service_env(srv.url)
        with urllib.request.urlopen(env["PAPERKB_ARXIV_OAI_URL"] + "?verb=ListRecords&metadataPrefix=arXivRaw") as r:
            assert r.read() == (shared_data / "arxiv/oai/saelim2015_ListRecordsResponse.xml").read_bytes()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(env["PAPERKB_ARXIV_PDF_URL"] + "/0704.0471")
        assert err.value.code == 404
        req = urllib.request.Request(env["PAPERKB_S2_API_URL"] + "/paper/batch?fields=title", method="POST",
                                     data=b'{"ids": ["ARXIV:0704.0471"]}', headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            assert json.loads(r.read()) == [None]
