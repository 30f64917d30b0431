package engram;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

/**
 * A batch of Lucene searches in one JNI call, with each hit's id read from its sort values.
 *
 * <p>Python (pyjnius) pays per call and per Java object it touches: searching query by query and
 * reading ids through Anserini's {@code ScoredDocs} (which loads every hit's stored document) cost
 * about 0.9 ms per query at k = 100. Here every query of a batch runs in one call, and a hit's id is
 * the second sort value of its {@code FieldDoc} (the index sorts by score, then by the numeric id
 * doc value), so no stored field is read.
 *
 * <p>Lucene is reached by reflection only, so this compiles against the JDK alone: any javac from 17
 * on builds it, while the Lucene classes themselves need Java 21 or newer to load.
 */
public final class BatchSearch {
    private static volatile Method search;
    private static volatile Field scoreDocs;
    private static volatile Field score;
    private static volatile Field fields;

    private BatchSearch() {}

    /**
     * Runs {@code searcher.search(query, k, sort, true)} for each query (a null query has no hits).
     *
     * @return for each query in order: its hit count {@code n}, then {@code n} ids, then {@code n}
     *     scores as {@link Float#floatToRawIntBits} values
     */
    public static long[] search(Object searcher, Object[] queries, int k, Object sort) throws Exception {
        Method run = search;
        if (run == null) {
            ClassLoader loader = searcher.getClass().getClassLoader();
            Class<?> queryClass = Class.forName("org.apache.lucene.search.Query", false, loader);
            Class<?> sortClass = Class.forName("org.apache.lucene.search.Sort", false, loader);
            Class<?> scoreDoc = Class.forName("org.apache.lucene.search.ScoreDoc", false, loader);
            scoreDocs = Class.forName("org.apache.lucene.search.TopDocs", false, loader).getField("scoreDocs");
            score = scoreDoc.getField("score");
            fields = Class.forName("org.apache.lucene.search.FieldDoc", false, loader).getField("fields");
            run = searcher.getClass().getMethod("search", queryClass, int.class, sortClass, boolean.class);
            search = run;
        }
        Object[][] hits = new Object[queries.length][];
        int total = queries.length;
        for (int q = 0; q < queries.length; q++) {
            if (queries[q] == null) {
                hits[q] = new Object[0];
                continue;
            }
            Object top = run.invoke(searcher, queries[q], k, sort, true);
            hits[q] = (Object[]) scoreDocs.get(top);
            total += 2 * hits[q].length;
        }
        long[] out = new long[total];
        int at = 0;
        for (Object[] docs : hits) {
            out[at++] = docs.length;
            for (Object doc : docs) {
                out[at++] = ((Number) ((Object[]) fields.get(doc))[1]).longValue();
            }
            for (Object doc : docs) {
                out[at++] = Float.floatToRawIntBits(score.getFloat(doc));
            }
        }
        return out;
    }
}
