export * from './servers.ts'
export * from './processes.ts'
