/**
 * `@ackline/amqp`: a RabbitMQ (AMQP 0-9-1) source that acknowledges only what was delivered, and a
 * sink that counts only what the broker confirmed. See `rfcs/0006-rabbitmq-connector.md`.
 *
 * @module @ackline/amqp
 */
export { AmqpError, type AmqpErrorCode } from './AmqpError.js'
export {
  AMQP_SINK_CONCURRENCY,
  type AmqpSink,
  type AmqpSinkCounters,
  AmqpSinkOptions,
  amqpSink,
} from './AmqpSink.js'
export { type AmqpSource, type AmqpSourceCounters, AmqpSourceOptions, amqpSource } from './AmqpSource.js'
