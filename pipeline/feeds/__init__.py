"""Following a field: interests (saved searches and seed sets), the feeds each snapshot lists for them (write),
their formats (formats) and the digest mail (mail)."""
