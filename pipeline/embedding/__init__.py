"""Text to vectors: chunking full text into passages, the sentence-transformers encoders and their backends."""
