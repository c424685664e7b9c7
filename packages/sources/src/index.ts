/**
 * @module @ackline/sources
 */
export { GeneratorOptions, type GeneratorSource, generator } from './GeneratorSource.js'
export {
  type HttpServerCounters,
  HttpServerError,
  type HttpServerErrorCode,
  type HttpServerHealth,
  HttpServerOptions,
  type HttpServerResponseBody,
  type HttpServerSource,
  httpServer,
} from './HttpServerSource.js'
export {
  fromObservable,
  type ObservableSource,
  ObservableSourceOptions,
  type RecordAck,
} from './ObservableSource.js'
export { type StdinFormat, StdinOptions, type StdinSource, stdin } from './StdinSource.js'
