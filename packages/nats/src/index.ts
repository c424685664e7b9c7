/**
 * `@ackline/nats`: a NATS JetStream source that acknowledges only what the pipeline delivered, a
 * JetStream sink that counts only what the stream confirmed, and a core-NATS sink for pipelines
 * without acknowledgements. See `rfcs/0007-nats-jetstream-connector.md`.
 *
 * @module
 */

export {
  JETSTREAM_SINK_CONCURRENCY,
  type JetStreamSink,
  type JetStreamSinkCounters,
  JetStreamSinkOptions,
  jetstreamSink,
} from './JetStreamSink.js'
export {
  type JetStreamMetadata,
  type JetStreamSource,
  type JetStreamSourceCounters,
  JetStreamSourceOptions,
  jetstream,
} from './JetStreamSource.js'
export { type NatsSink, NatsSinkOptions, natsSink } from './NatsSink.js'
