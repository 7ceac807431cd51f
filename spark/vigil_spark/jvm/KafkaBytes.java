package dev.vigil.spark;

import org.apache.spark.sql.api.java.UDF2;

/**
 * Big-endian integers and unsigned varints read from a binary column, for the SQL OffsetCommit decoder.
 *
 * <p>Registered as SQL functions by {@code vigil_spark.session.build} when this jar is on the classpath.
 * Each takes (binary, 1-based position as bigint) like {@code substring}, and gives null when the value
 * does not fit before the end (or an input is null): the decoder's length checks then reject the record,
 * so a damaged record is a null, never an exception. They replace {@code conv(hex(substring(...)))}, which
 * builds two strings per integer and costs about four times as much (bench/RESULTS.md).
 */
public final class KafkaBytes {
  /** Kafka's readUnsignedVarint refuses longer encodings. */
  static final int MAX_VARINT_BYTES = 5;

  private KafkaBytes() {}

  /** The 0-based index of {@code size} bytes at the 1-based {@code pos}, or -1 when they are not all there. */
  static int start(byte[] b, Object pos, int size) {
    if (b == null || pos == null) {
      return -1;
    }
    long p = ((Number) pos).longValue() - 1;
    return p < 0 || p + size > b.length ? -1 : (int) p;
  }

  static long bigEndian(byte[] b, int p, int size) {
    long v = 0;
    for (int i = 0; i < size; i++) {
      v = (v << 8) | (b[p + i] & 0xff);
    }
    return v;
  }

  /** {@code vigil_int16}: signed. */
  public static final class Int16 implements UDF2<byte[], Object, Integer> {
    @Override
    public Integer call(byte[] b, Object pos) {
      int p = start(b, pos, 2);
      return p < 0 ? null : (int) (short) bigEndian(b, p, 2);
    }
  }

  /** {@code vigil_int32}: signed. */
  public static final class Int32 implements UDF2<byte[], Object, Integer> {
    @Override
    public Integer call(byte[] b, Object pos) {
      int p = start(b, pos, 4);
      return p < 0 ? null : (int) bigEndian(b, p, 4);
    }
  }

  /** {@code vigil_int64}: signed (two's complement falls out of the shifts). */
  public static final class Int64 implements UDF2<byte[], Object, Long> {
    @Override
    public Long call(byte[] b, Object pos) {
      int p = start(b, pos, 8);
      return p < 0 ? null : bigEndian(b, p, 8);
    }
  }

  /**
   * {@code vigil_uvarint}: an unsigned LEB128 varint packed as {@code value << 3 | bytes used}, so one call
   * gives both; null when truncated or longer than five bytes.
   */
  public static final class Uvarint implements UDF2<byte[], Object, Long> {
    @Override
    public Long call(byte[] b, Object pos) {
      int p = start(b, pos, 1);
      if (p < 0) {
        return null;
      }
      long v = 0;
      for (int i = 0; i < MAX_VARINT_BYTES && p + i < b.length; i++) {
        int octet = b[p + i] & 0xff;
        v |= (long) (octet & 0x7f) << (7 * i);
        if (octet < 0x80) {
          return (v << 3) | (i + 1);
        }
      }
      return null;
    }
  }
}
