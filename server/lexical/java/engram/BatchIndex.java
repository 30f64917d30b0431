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
    private static volatile Object storeYes;

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
        stringField = Class.forName("org.apache.lucene.document.StringField", false, loader)
                .getConstructor(String.class, String.class, store);
        numericField = Class.forName("org.apache.lucene.document.NumericDocValuesField", false, loader)
                .getConstructor(String.class, long.class);
        textField = Class.forName("org.apache.lucene.document.Field", false, loader)
                .getConstructor(String.class, CharSequence.class, fieldType);
        document = docClass.getConstructor();
        term = termClass.getConstructor(String.class, String.class);
        add = docClass.getMethod("add", indexable);
        update = writer.getClass().getMethod("updateDocument", termClass, Iterable.class);
    }

    /**
     * For each i: a document with {@code idField} = ids[i] (a stored keyword), {@code idNumField} = ids[i] (a
     * numeric doc value), texts[i] in every field of {@code textFields}, and codes[i] in {@code codeField} when
     * it is not empty, all text fields of {@code textType}; added with {@code updateDocument} on the id term.
     */
    public static void update(Object writer, Object textType, String idField, String idNumField, String[] textFields,
                              String codeField, long[] ids, String[] texts, String[] codes) throws Exception {
        bind(writer);
        for (int i = 0; i < ids.length; i++) {
            String id = Long.toString(ids[i]);
            Object doc = document.newInstance();
            add.invoke(doc, stringField.newInstance(idField, id, storeYes));
            add.invoke(doc, numericField.newInstance(idNumField, ids[i]));
            for (String field : textFields) {
                add.invoke(doc, textField.newInstance(field, texts[i], textType));
            }
            if (codes[i] != null && !codes[i].isEmpty()) {
                add.invoke(doc, textField.newInstance(codeField, codes[i], textType));
            }
            update.invoke(writer, term.newInstance(idField, id), doc);
        }
    }
}
