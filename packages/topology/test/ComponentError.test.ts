// Every error the topology throws on purpose is a ComponentError: a code, the component, the
// field, the cause.
import type { EventArray } from '@ackline/core'
import {
  ComponentError,
  type LifecycleEvent,
  RejectError,
  RetryableError,
  TopologyBuilder,
  TopologyError,
} from '@ackline/topology'
import { describe, expect, it } from 'vitest'
import { testSink, testSource } from './support/TestComponents.js'

const quiet = { onWarning: () => {} }

describe('ComponentError', () => {
  it('names the component and the field in front of the message, and keeps the cause', () => {
    const cause = new Error('ECONNRESET')
    const error = new ComponentError('QUOTA', 'quota used up', {
      component: 'archive',
      field: 'quotaBytes',
      cause,
    })
    expect(error.message).toBe('archive (quotaBytes): quota used up')
    expect(error).toMatchObject({
      name: 'ComponentError',
      code: 'QUOTA',
      component: 'archive',
      field: 'quotaBytes',
    })
    expect(error.cause).toBe(cause)
    expect(error).toBeInstanceOf(Error)
  })

  it('leaves out what it is not about', () => {
    expect(new ComponentError('X', 'text').message).toBe('text')
    expect(new ComponentError('X', 'text', { field: 'path' }).message).toBe('path: text')
    const error = new ComponentError('X', 'text', { component: 'c' })
    expect(error.message).toBe('c: text')
    expect(error.field).toBeUndefined()
    expect('cause' in error).toBe(false)
  })

  it('is the base of RejectError, RetryableError and TopologyError, each with its own name and code', () => {
    const cause = new Error('400')
    const reject = new RejectError('http', 'refused', { cause, field: 'body' })
    const retry = new RetryableError('file', 'unavailable')
    expect(reject).toBeInstanceOf(ComponentError)
    expect(reject).toMatchObject({ name: 'RejectError', code: 'REJECTED', component: 'http', field: 'body' })
    expect(reject.message).toBe('http (body): refused')
    expect(reject.cause).toBe(cause)
    expect(retry).toBeInstanceOf(ComponentError)
    expect(retry).toMatchObject({ name: 'RetryableError', code: 'RETRYABLE', component: 'file' })
    expect(retry.message).toBe('file: unavailable')

    let thrown: unknown
    try {
      new TopologyBuilder<string>(quiet).sink('out', ['nowhere'], testSink()).build()
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(TopologyError)
    expect(thrown).toBeInstanceOf(ComponentError)
    expect(thrown).toMatchObject({ name: 'TopologyError', code: 'INVALID_TOPOLOGY', component: undefined })
    expect((thrown as TopologyError).message).toContain("out (inputs[0]): input 'nowhere'")
  })

  it('is what start() throws when a topology that ran is started again', async () => {
    const topology = new TopologyBuilder(quiet)
      .source('in', testSource([]))
      .sink('out', ['in'], testSink())
      .build()
    await topology.start()
    await topology.stop()
    const failure = await topology.start().catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(ComponentError)
    expect(failure).toMatchObject({ name: 'ComponentError', code: 'RUNS_ONCE' })
    expect((failure as Error).message).toMatch(/runs once: start\(\) was called while it is stopped/)
  })

  it('is what a transform gets when it emits on a port it does not declare, reported as PROCESS_FAILED', async () => {
    const facts: LifecycleEvent[] = []
    const topology = new TopologyBuilder(quiet)
      .source('in', testSource([[{ n: 1 }]]))
      .transform('t', ['in'], {
        kind: 'stray',
        process(events: EventArray, context) {
          for (const event of events) context.emit(event, 'nowhere')
        },
      })
      .sink('out', ['t'], testSink())
      .build()
    topology.lifecycle.subscribe((fact) => facts.push(fact))
    await topology.start()
    await topology.done
    const failed = facts.find((f) => f.type === 'component_error' && f.code === 'PROCESS_FAILED')
    expect(failed).toBeDefined()
    const cause = (failed as { cause?: unknown }).cause
    expect(cause).toBeInstanceOf(ComponentError)
    expect(cause).toMatchObject({ code: 'UNDECLARED_PORT', component: 't', field: 'outputs' })
  })
})
