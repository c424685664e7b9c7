/**
 * @module @ackline/sources
 */
export {
  DEAD_LETTER_FILE,
  type FileSource,
  type FileSourceOptions,
  type FileStartAt,
  file,
} from './FileSource.js'
export { FileSourceError, type FileSourceErrorCode } from './FileSourceError.js'
export { GeneratorOptions, type GeneratorSource, generator } from './GeneratorSource.js'
export {
  type HttpServerCounters,
  HttpServerError,
  type HttpServerErrorCode,
  type HttpServerHealth,
  HttpServerOptions,
  type HttpServerRecordStatus,
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
