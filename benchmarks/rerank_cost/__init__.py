"""What a cheaper CPU cross-encoder costs and what it keeps: ms/pair side by side
(:mod:`.timing`) and quality through the real server with the reranker swapped (:mod:`.quality`)."""
