"""The four action kinds: what each does with a claimed run (or, for a digest, a window of runs)."""
