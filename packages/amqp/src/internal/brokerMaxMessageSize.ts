/**
 * Reading the broker's message size limit from the words it closes a channel with.
 *
 * @module
 */

/**
 * The limit a broker named when it closed a channel for a message over its `max_message_size`
 * (RabbitMQ: `406 PRECONDITION_FAILED - message size N is larger than configured max size M`, or
 * `… than max size M` when the limit is its hard cap, 512 MiB).
 */
export function brokerMaxMessageSize(error: Error): number | undefined {
  const match = /message size \d+ is larger than (?:configured )?max size (\d+)/.exec(error.message)
  return match === null ? undefined : Number(match[1])
}
