package partout;

import com.facebook.presto.common.Page;
import com.facebook.presto.common.block.AbstractArrayBlock;
import com.facebook.presto.common.block.AbstractMapBlock;
import com.facebook.presto.common.block.AbstractRowBlock;
import com.facebook.presto.common.block.Block;
import com.facebook.presto.common.block.BlockEncodingManager;
import com.facebook.presto.common.block.ByteArrayBlock;
import com.facebook.presto.common.block.ColumnarMap;
import com.facebook.presto.common.block.DictionaryBlock;
import com.facebook.presto.common.block.Int128ArrayBlock;
import com.facebook.presto.common.block.IntArrayBlock;
import com.facebook.presto.common.block.LongArrayBlock;
import com.facebook.presto.common.block.RunLengthEncodedBlock;
import com.facebook.presto.common.block.ShortArrayBlock;
import com.facebook.presto.common.block.VariableWidthBlock;
import com.facebook.presto.spi.page.PagesSerde;
import com.facebook.presto.spi.page.PagesSerdeUtil;
import com.facebook.presto.spi.page.SerializedPage;
import com.facebook.presto.spi.page.PageCompressor;
import com.facebook.presto.spi.page.PageDecompressor;
import io.airlift.compress.lz4.Lz4Compressor;
import io.airlift.compress.lz4.Lz4Decompressor;
import io.airlift.slice.Slice;
import io.airlift.slice.Slices;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Iterator;
import java.util.Optional;

/**
 * Reads a file of Presto pages with Presto's own deserializer and prints every value, one line
 * per row ("page N" before each page's rows), without knowing the column types: fixed-width
 * values as integers (INT128 as "low:high"), variable-width values as hex, arrays as [..],
 * maps as {k=v,..}, rows as (..), nulls as "null". A checksum mismatch is an error.
 */
public final class PageDump {
    private PageDump() {}

    /** Raw LZ4 blocks, as Presto's exchange compresses them (PagesSerde wants both sides). */
    private static final class Lz4PageCompressor implements PageCompressor {
        private final Lz4Compressor lz4 = new Lz4Compressor();

        @Override
        public int maxCompressedLength(int uncompressedSize) {
            return lz4.maxCompressedLength(uncompressedSize);
        }

        @Override
        public int compress(byte[] input, int inputOffset, int inputLength, byte[] output, int outputOffset, int maxOutputLength) {
            return lz4.compress(input, inputOffset, inputLength, output, outputOffset, maxOutputLength);
        }

        @Override
        public void compress(ByteBuffer input, ByteBuffer output) {
            lz4.compress(input, output);
        }
    }

    /** Raw LZ4 blocks, as Presto's exchange decompresses them. */
    private static final class Lz4PageDecompressor implements PageDecompressor {
        private final Lz4Decompressor lz4 = new Lz4Decompressor();

        @Override
        public int decompress(byte[] input, int inputOffset, int inputLength, byte[] output, int outputOffset, int maxOutputLength) {
            return lz4.decompress(input, inputOffset, inputLength, output, outputOffset, maxOutputLength);
        }

        @Override
        public void decompress(ByteBuffer input, ByteBuffer output) {
            lz4.decompress(input, output);
        }
    }

    public static void main(String[] args) throws Exception {
        byte[] bytes = Files.readAllBytes(Path.of(args[0]));
        PagesSerde serde = serde();
        Iterator<SerializedPage> pages = PagesSerdeUtil.readSerializedPages(Slices.wrappedBuffer(bytes).getInput());
        StringBuilder out = new StringBuilder();
        while (pages.hasNext()) {
            Page page = deserialize(serde, pages.next());
            out.append("page ").append(page.getPositionCount()).append('\n');
            appendRows(page, out);
        }
        System.out.print(out);
    }

    /** Presto's page serde with the raw LZ4 codec of its exchange. */
    static PagesSerde serde() {
        return new PagesSerde(new BlockEncodingManager(), Optional.of(new Lz4PageCompressor()), Optional.of(new Lz4PageDecompressor()), Optional.empty());
    }

    /** The page, its checksum verified first. */
    static Page deserialize(PagesSerde serde, SerializedPage serialized) {
        if (!PagesSerdeUtil.isChecksumValid(serialized)) {
            throw new IllegalStateException("checksum mismatch");
        }
        return serde.deserialize(serialized);
    }

    /** Every row of the page, one line each: its values separated by '|'. */
    static void appendRows(Page page, StringBuilder out) {
        for (int row = 0; row < page.getPositionCount(); row++) {
            for (int column = 0; column < page.getChannelCount(); column++) {
                if (column > 0) {
                    out.append('|');
                }
                dump(page.getBlock(column), row, out);
            }
            out.append('\n');
        }
    }

    private static void dump(Block block, int position, StringBuilder out) {
        if (block instanceof RunLengthEncodedBlock) {
            dump(((RunLengthEncodedBlock) block).getValue(), 0, out);
            return;
        }
        if (block instanceof DictionaryBlock) {
            DictionaryBlock dictionary = (DictionaryBlock) block;
            dump(dictionary.getDictionary(), dictionary.getId(position), out);
            return;
        }
        if (block.isNull(position)) {
            out.append("null");
        }
        else if (block instanceof ByteArrayBlock) {
            out.append(block.getByte(position));
        }
        else if (block instanceof ShortArrayBlock) {
            out.append(block.getShort(position));
        }
        else if (block instanceof IntArrayBlock) {
            out.append(block.getInt(position));
        }
        else if (block instanceof LongArrayBlock) {
            out.append(block.getLong(position));
        }
        else if (block instanceof Int128ArrayBlock) {
            out.append(block.getLong(position, 0)).append(':').append(block.getLong(position, 8));
        }
        else if (block instanceof VariableWidthBlock) {
            Slice value = block.getSlice(position, 0, block.getSliceLength(position));
            for (int i = 0; i < value.length(); i++) {
                out.append(String.format("%02x", value.getByte(i) & 0xff));
            }
        }
        else if (block instanceof AbstractArrayBlock) {
            Block elements = block.getBlock(position);
            out.append('[');
            for (int i = 0; i < elements.getPositionCount(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                dump(elements, i, out);
            }
            out.append(']');
        }
        else if (block instanceof AbstractMapBlock) {
            ColumnarMap map = ColumnarMap.toColumnarMap(block);
            int offset = map.getOffset(position);
            out.append('{');
            for (int i = 0; i < map.getEntryCount(position); i++) {
                if (i > 0) {
                    out.append(',');
                }
                dump(map.getKeysBlock(), offset + i, out);
                out.append('=');
                dump(map.getValuesBlock(), offset + i, out);
            }
            out.append('}');
        }
        else if (block instanceof AbstractRowBlock) {
            Block row = block.getBlock(position);
            out.append('(');
            for (int i = 0; i < row.getPositionCount(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                dump(row.getSingleValueBlock(i), 0, out);
            }
            out.append(')');
        }
        else {
            throw new IllegalStateException("unexpected block " + block.getClass().getName());
        }
    }
}
