/**
 * @module @ackline/sources
 */
export { type GeneratorOptions, type GeneratorSource, generator } from './GeneratorSource.js'
export {
  fromObservable,
  type ObservableSource,
  type ObservableSourceOptions,
  type RecordAck,
} from './ObservableSource.js'
