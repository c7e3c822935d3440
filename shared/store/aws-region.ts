/** The region every AWS client here (S3, Lambda) and the functions' environments default to when none is configured. */
export const DEFAULT_AWS_REGION = 'us-east-1';
