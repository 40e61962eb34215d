"""Is erased data gone, and can one party harm another? Erasure and deletion by provenance, skill
poisoning, slow and greedy clients, review abuse, and compiled pages after an erasure."""
