-- figure_legends: the figure legends the search indexes (the embed step reads this view): every
-- figure with a non-empty legend, with its paper's title.
--   figure_id, paper_id, label, number, page, text   from figures
--   title                                            the paper's title
CREATE OR REPLACE VIEW figure_legends AS
SELECT f.figure_id, f.paper_id, f.label, f.number, f.page, f.text, p.title
FROM figures f
LEFT JOIN papers p ON p.paper_id = f.paper_id
WHERE coalesce(trim(f.text), '') <> '';
