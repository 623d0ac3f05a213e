package eddy.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * Kafka Streams on Eddy's benchmark workload: 5 s tumbling windows with 1 s grace, count / avg /
 * min / max of the temperature per sensor, one final result per window (suppress until the window
 * closes), written as JSON to the output topic.
 *
 * <p>Event time is the record timestamp: the harness writes each reading with its event time as the
 * Kafka timestamp, so the default extractor is the idiomatic choice and saves a second parse. A
 * window closes when the task's stream time passes end + grace, which is Eddy's per-partition
 * watermark rule (newest timestamp minus 1 s).
 *
 * <p>Usage: Averages bootstrap input output application-id state-dir guarantee commit-interval-ms
 */
public final class Averages {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** The window's aggregate, 32 bytes in the store and its changelog. */
  record Stats(long count, double sum, double min, double max) {
    static final Stats EMPTY = new Stats(0, 0.0, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY);

    Stats add(double t) {
      return new Stats(count + 1, sum + t, Math.min(min, t), Math.max(max, t));
    }
  }

  static final class StatsSerde implements Serde<Stats> {
    @Override
    public Serializer<Stats> serializer() {
      return (topic, s) ->
          s == null
              ? null
              : ByteBuffer.allocate(32).putLong(s.count).putDouble(s.sum).putDouble(s.min)
                  .putDouble(s.max).array();
    }

    @Override
    public Deserializer<Stats> deserializer() {
      return (topic, bytes) -> {
        if (bytes == null) {
          return null;
        }
        ByteBuffer b = ByteBuffer.wrap(bytes);
        return new Stats(b.getLong(), b.getDouble(), b.getDouble(), b.getDouble());
      };
    }
  }

  static double temperature(byte[] value) {
    try {
      JsonNode node = JSON.readTree(value);
      return node.get("temperature").asDouble();
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("not a reading", e);
    }
  }

  static String result(String sensor, long start, long end, Stats s) {
    Map<String, Object> out = new HashMap<>();
    out.put("sensor_id", sensor);
    out.put("window_start_ms", start);
    out.put("window_end_ms", end);
    out.put("count", s.count);
    out.put("avg", s.sum / s.count);
    out.put("min", s.min);
    out.put("max", s.max);
    try {
      return JSON.writeValueAsString(out);
    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  public static void main(String[] args) throws InterruptedException {
    if (args.length < 7 || args.length > 8) {
      System.err.println(
          "usage: Averages bootstrap input output application-id state-dir guarantee commit-ms"
              + " [stream-threads]");
      System.exit(2);
    }
    Properties props = new Properties();
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
    props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
    props.put(
        StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
        args[5].equals("exactly_once") ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(args[6]));
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    // One thread unless told: the all-cores contender gives one per core.
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.length == 8 ? Integer.parseInt(args[7]) : 1);

    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(args[1], Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .mapValues(Averages::temperature)
        .groupByKey(Grouped.with(Serdes.String(), Serdes.Double()))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(5_000), Duration.ofMillis(1_000)))
        .aggregate(
            () -> Stats.EMPTY,
            (sensor, t, stats) -> stats.add(t),
            Materialized.with(Serdes.String(), new StatsSerde()))
        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
        .toStream()
        .map(
            (w, s) ->
                KeyValue.pair(
                    w.key(), result(w.key(), w.window().start(), w.window().end(), s)))
        .to(args[2], Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    // SIGTERM from the harness: close() commits and leaves the group.
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  streams.close(Duration.ofSeconds(30));
                  stopped.countDown();
                }));
    streams.setUncaughtExceptionHandler(
        e -> {
          e.printStackTrace();
          return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
              .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
    streams.start();
    stopped.await();
  }
}
