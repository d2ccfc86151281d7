"""Retrieval evaluation: queries and qrels (qrels), runs scored with ir-measures (evaluate)."""
