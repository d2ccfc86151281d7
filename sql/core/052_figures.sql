-- figures: one row per figure legend (caption) found in a paper's PDF (grain: paper, figure number).
--   figure_id     '<paper_id>#fig<number>'
--   paper_id      the paper (papers.paper_id)
--   label         the label as printed, spaces normalised: 'Figure 3', 'Fig. 3'
--   number        the figure number (3)
--   page          1-based PDF page of the legend
--   text          the full legend, starting with its label, all its lines joined
--   content_hash  sha256 of text
CREATE TABLE IF NOT EXISTS figures (
    figure_id     VARCHAR PRIMARY KEY,
    paper_id      VARCHAR NOT NULL,
    label         VARCHAR NOT NULL,
    number        INTEGER NOT NULL,
    page          INTEGER,
    text          VARCHAR NOT NULL,
    content_hash  VARCHAR NOT NULL
);
