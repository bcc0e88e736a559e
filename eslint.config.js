import neostandard from 'neostandard'

export default neostandard({ ts: true, ignores: ['dist', 'drizzle', 'coverage', '.tap'] })
