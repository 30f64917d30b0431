package engram;

import java.lang.reflect.Constructor;
import java.lang.reflect.Method;

/**
 * A Write's Lucene documents built and added in one JNI call.
 *
 * <p>Built from Python, each document took a dozen pyjnius calls (the id keyword, the id doc value, two text
 * fields, the code field, the document and its adds, the id term, {@code updateDocument}), each bound and
 * called under a lock: a Write of 128 short memories paid about 1,500 of them. Here a Write's documents are
 * built in Java from arrays, with the same fields as {@code server/lexical/documents.py}
 * {@code DocumentFactory.document}, and added by {@code IndexWriter.updateDocument} (a document of the same
 * id is replaced).
 *
 * <p>Lucene is reached by reflection only, so this compiles against the JDK alone (as {@link BatchSearch}).
 */
public final class BatchIndex {
    private static volatile Constructor<?> stringField;
    private static volatile Constructor<?> numericField;
    private static volatile Constructor<?> textField;
    private static volatile Constructor<?> document;
    private static volatile Constructor<?> term;
    private static volatile Method add;
    private static volatile Method update;
    private static volatile Method updateBlock;
    private static volatile Object storeYes;
    private static volatile Object storeNo;

    private BatchIndex() {}

    private static synchronized void bind(Object writer) throws Exception {
        if (update != null) {
            return;
        }
        ClassLoader loader = writer.getClass().getClassLoader();
        Class<?> store = Class.forName("org.apache.lucene.document.Field$Store", false, loader);
        Class<?> fieldType = Class.forName("org.apache.lucene.index.IndexableFieldType", false, loader);
        Class<?> indexable = Class.forName("org.apache.lucene.index.IndexableField", false, loader);
        Class<?> docClass = Class.forName("org.apache.lucene.document.Document", false, loader);
        Class<?> termClass = Class.forName("org.apache.lucene.index.Term", false, loader);
        storeYes = store.getField("YES").get(null);
        storeNo = store.getField("NO").get(null);
        stringField = Class.forName("org.apache.lucene.document.StringField", false, loader)
                .getConstructor(String.class, String.class, store);
        numericField = Class.forName("org.apache.lucene.document.NumericDocValuesField", false, loader)
                .getConstructor(String.class, long.class);
        textField = Class.forName("org.apache.lucene.document.Field", false, loader)
                .getConstructor(String.class, CharSequence.class, fieldType);
        document = docClass.getConstructor();
        term = termClass.getConstructor(String.class, String.class);
        add = docClass.getMethod("add", indexable);
        updateBlock = writer.getClass().getMethod("updateDocuments", termClass, Iterable.class);
        update = writer.getClass().getMethod("updateDocument", termClass, Iterable.class);
    }

    /**
     * For each i: a document with {@code idField} = ids[i] (a stored keyword), {@code idNumField} = ids[i] (a
     * numeric doc value), texts[i] in every field of {@code textFields}, and codes[i] in {@code codeField} when
     * it is not empty, all text fields of {@code textType}; added with {@code updateDocument} on the id term.
     */
    public static void update(Object writer, Object textType, String idField, String idNumField, String[] textFields,
                              String codeField, long[] ids, String[] texts, String[] codes) throws Exception {
        updateBlocks(writer, textType, idField, idNumField, textFields, codeField, null, ids, texts, codes,
                     new int[ids.length]);
    }

    /**
     * {@link #update}, where each document i is followed by windows[i] documents of the same id (a long memory's
     * windows, server/lexical/windows.py), the j-th of them at index i + j of the arrays with {@code windowField} =
     * "1" (an unstored keyword); a document and its windows replace every document of their id as one block
     * ({@code updateDocuments}).
     */
    public static void updateBlocks(Object writer, Object textType, String idField, String idNumField,
                                    String[] textFields, String codeField, String windowField, long[] ids,
                                    String[] texts, String[] codes, int[] windows) throws Exception {
        bind(writer);
        int i = 0;
        while (i < ids.length) {
            String id = Long.toString(ids[i]);
            int size = 1 + windows[i];
            java.util.List<Object> block = new java.util.ArrayList<>(size);
            for (int j = i; j < i + size; j++) {
                Object doc = document.newInstance();
                add.invoke(doc, stringField.newInstance(idField, id, storeYes));
                add.invoke(doc, numericField.newInstance(idNumField, ids[i]));
                for (String field : textFields) {
                    add.invoke(doc, textField.newInstance(field, texts[j], textType));
                }
                if (codes[j] != null && !codes[j].isEmpty()) {
                    add.invoke(doc, textField.newInstance(codeField, codes[j], textType));
                }
                if (j > i) {
                    add.invoke(doc, stringField.newInstance(windowField, "1", storeNo));
                }
                block.add(doc);
            }
            if (size == 1) {
                update.invoke(writer, term.newInstance(idField, id), block.get(0));
            } else {
                updateBlock.invoke(writer, term.newInstance(idField, id), block);
            }
            i += size;
        }
    }
}
