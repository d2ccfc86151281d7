-- reference_links: what each PDF reference (paper_references) was matched to (grain: reference_id).
-- Replaced by each `paperkb graph` run, which then writes the matched and unmatched references as
-- `citations` edges with source 'pdf' (an edge Semantic Scholar already gives is kept once, as 's2').
--   reference_id    paper_references.reference_id
--   paper_id        the citing paper
--   citing_work_id  works.work_id of the citing paper (its S2 work when enrich found it, else its paper_id)
--   cited_work_id   the work the reference names: a corpus paper's or a known work's work_id when matched,
--                   else a work of its own: 'arxiv:<id>', 'doi:<doi>' or 'ref:<hash of title + year>',
--                   so two papers citing the same unknown work share it (CCBC, counts)
--   cited_paper_id  papers.paper_id when the cited work is a corpus paper, else NULL
--   method          how it was matched: 'arxiv_id', 'doi', 'title' (normalised title equal, years within 2),
--                   'fuzzy_title' (rapidfuzz ratio >= the threshold, years within 1), 'title_in_text' (a
--                   known title printed whole as a sentence of the entry), or 'unmatched'
--   score           the title similarity (0-100) for title matches; NULL otherwise
--   run_id          run_log.run_id of the graph run that made the link as it is (a later run that matches the
--                   reference the same way keeps it, so an unchanged link is not a change to publish)
CREATE TABLE IF NOT EXISTS reference_links (
    reference_id    VARCHAR PRIMARY KEY,
    paper_id        VARCHAR NOT NULL,
    citing_work_id  VARCHAR NOT NULL,
    cited_work_id   VARCHAR NOT NULL,
    cited_paper_id  VARCHAR,
    method          VARCHAR NOT NULL,
    score           DOUBLE,
    run_id          VARCHAR
);
