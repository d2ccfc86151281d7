"""Bring your own library: import a folder of PDFs (pdf_folder) or a reference manager's PDFs (manager_pdfs), and
match a reference-manager library to the papers of a catalog (match)."""
