// Migrations are plain .sql files: the compiled store reads them from beside itself.
import { cpSync, mkdirSync } from 'node:fs';
mkdirSync('dist/src/store/migrations', { recursive: true });
cpSync('src/store/migrations', 'dist/src/store/migrations', { recursive: true });
