/** The config's error and its URL redaction, apart from the loader so the CLI's error path loads no YAML parser. */

export class ConfigError extends Error {
  constructor(readonly key: string, message: string) {
    super(`config ${key}: ${message}`);
    this.name = 'ConfigError';
  }
}

/** A URL with its password (and anything that looks like one) replaced, for messages and logs. */
export function redactUrl(text: string): string {
  return text.replace(/(\/\/[^/:@\s]*):[^@\s]*@/g, '$1:***@').replace(/([?&]password=)[^&\s]*/gi, '$1***');
}
