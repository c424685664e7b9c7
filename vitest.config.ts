import { defineConfig } from 'vitest/config'

// Tests run on `src/` through the `source` export condition, so no build step precedes them.
export default defineConfig({
  resolve: { conditions: ['source', 'module', 'node', 'import', 'default'] },
  ssr: { resolve: { conditions: ['source', 'module', 'node', 'import', 'default'] } },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    execArgv: ['--expose-gc'],
    testTimeout: 20_000,
    reporters: ['default', ['json', { outputFile: '.tmp/vitest-results.json' }]],
    env: { ACKLINE_STRICT: '1' },
  },
})
