/** The key codec's one error type: every failure names the offending input and the rule it broke. */

/** A value or key the codec refuses (an invalid number, date or key, or a key over DynamoDB's size limit). */
export class KeyError extends Error {
  override name = "KeyError";
}
