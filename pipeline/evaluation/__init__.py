"""Retrieval evaluation: queries and qrels (qrels), runs scored as trec_eval and ir-measures score them (measures, evaluate)."""
