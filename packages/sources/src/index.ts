/**
 * @module @ackline/sources
 */
export { type GeneratorOptions, type GeneratorSource, generator } from './GeneratorSource.js'
export {
  type HttpServerCounters,
  HttpServerError,
  type HttpServerErrorCode,
  type HttpServerHealth,
  type HttpServerOptions,
  type HttpServerResponseBody,
  type HttpServerSource,
  httpServer,
} from './HttpServerSource.js'
export {
  fromObservable,
  type ObservableSource,
  type ObservableSourceOptions,
  type RecordAck,
} from './ObservableSource.js'
export { type StdinFormat, type StdinOptions, type StdinSource, stdin } from './StdinSource.js'
