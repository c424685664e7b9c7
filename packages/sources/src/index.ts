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
export { type GeneratorOptions, type GeneratorSource, generator } from './GeneratorSource.js'
export {
  HttpServerError,
  type HttpServerErrorCode,
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
