// Prints vitest's totals as one plain closing line: "N passed, N failed, N skipped".
import { readFileSync } from 'node:fs'

const results = JSON.parse(readFileSync(new URL('../.tmp/vitest-results.json', import.meta.url), 'utf8'))
const skipped = results.numPendingTests + results.numTodoTests
console.log(`tests: ${results.numPassedTests} passed, ${results.numFailedTests} failed, ${skipped} skipped`)
if (results.numTotalTests === 0 || results.numFailedTests > 0) process.exit(1)
