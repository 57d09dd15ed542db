export * from './servers.ts'
export * from './processes.ts'
export * from './contract.ts'
export * from './receiver.ts'
