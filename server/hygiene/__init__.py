"""Memory hygiene: what a write carries (text normalisation, salience), whether a message needs recalling
(the recall gate), episodic → semantic consolidation and the optional model-backed extractor."""
