export { default } from '../../vitest.base.ts'
