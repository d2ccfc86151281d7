-- work_authors rows (the byline) of the staged corpus papers.
SELECT sha AS work_id, (i - 1)::INTEGER AS position, authors[i].authorId AS author_id, authors[i].name AS name
FROM (SELECT sha, authors, unnest(range(1, len(authors) + 1)) AS i FROM _ds_corpus WHERE authors IS NOT NULL);
