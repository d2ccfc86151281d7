-- The S2 Datasets' file formats (gzipped JSON lines; https://api.semanticscholar.org/api-docs/datasets),
-- as table macros over a list of files: only the fields paperkb keeps, with their types.
--   s2ds_papers(files)     "papers" (and its diffs' update files): one paper per line; the S2 paperId is
--                          the last segment of "url"
--   s2ds_citations(files)  "citations": one edge per line, citing -> cited by corpus id; "intents" holds one
--                          list per citation context (flattened to the distinct intents, sorted)
--   s2ds_deleted(files)    a diff's delete files: the primary key of each deleted record
--                          (corpusid for papers, citationid for citations)
CREATE OR REPLACE TEMP MACRO s2ds_papers(files) AS TABLE
SELECT corpusid,
       lower(regexp_extract(url, '([0-9a-fA-F]{40})$', 1)) AS sha,
       nullif(externalids.ArXiv, '') AS arxiv_id,
       nullif(externalids.DOI, '') AS doi,
       title, year,
       TRY_CAST(publicationdate AS DATE) AS publication_date,
       publicationtypes AS publication_types,
       nullif(venue, '') AS venue,
       citationcount AS citation_count,
       influentialcitationcount AS influential_citation_count,
       referencecount AS reference_count,
       authors, filename
FROM read_json(files, format = 'newline_delimited', compression = 'gzip', filename = true,
               columns = {corpusid: 'BIGINT', externalids: 'STRUCT(ArXiv VARCHAR, DOI VARCHAR)', url: 'VARCHAR',
                          title: 'VARCHAR', authors: 'STRUCT(authorId VARCHAR, name VARCHAR)[]', venue: 'VARCHAR',
                          year: 'INTEGER', referencecount: 'INTEGER', citationcount: 'INTEGER',
                          influentialcitationcount: 'INTEGER', publicationtypes: 'VARCHAR[]',
                          publicationdate: 'VARCHAR'});

CREATE OR REPLACE TEMP MACRO s2ds_citations(files) AS TABLE
SELECT citationid, citingcorpusid, citedcorpusid, isinfluential,
       list_sort(list_distinct(flatten(intents))) AS intents
FROM read_json(files, format = 'newline_delimited', compression = 'gzip',
               columns = {citationid: 'BIGINT', citingcorpusid: 'BIGINT', citedcorpusid: 'BIGINT',
                          isinfluential: 'BOOLEAN', intents: 'VARCHAR[][]'});

CREATE OR REPLACE TEMP MACRO s2ds_deleted(files, key) AS TABLE
SELECT TRY_CAST(json_extract_string(json, '$.' || key) AS BIGINT) AS id
FROM read_json_objects(files, format = 'newline_delimited', compression = 'gzip');
