"""PDFs: the polite downloader into the raw zone (client), text extraction (text) and figure legends (figures)."""
