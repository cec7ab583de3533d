"""Helpers and corpora the tests share: util (array strategies, tree comparison, slicing of
big tables), the golden programs, and the corpus of Python control flow to convert."""
