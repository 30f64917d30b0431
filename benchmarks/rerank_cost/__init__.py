"""What a cheaper CPU cross-encoder costs and what it keeps (issue #23, item 2): ms/pair side by side
(:mod:`.timing`) and quality through the real server with the reranker swapped (:mod:`.quality`)."""
