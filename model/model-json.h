/* brigade: what the JSON model reader (model_json.c) and writer
 * (model_json_write.c) share (private to the model room). */
#ifndef BRIGADE_MODEL_JSON_H
#define BRIGADE_MODEL_JSON_H

#include <stddef.h>

#define FORMAT_NAME "brigade-model"
#define FORMAT_VERSION 1

/* Copy at most max bytes of s into buf (of size > max + 3), replacing
 * control characters by '?' and marking a cut with "...", so that text from
 * a file cannot garble a message. Never cuts inside a UTF-8 sequence.
 * Returns buf. */
const char *brg_json_clean(const char *s, char *buf, size_t size, size_t max);

/* The shortest "%.*g" form of d (with a '.' whatever the locale) with at
 * most max_digits digits that strtod reads back to d, or, with as_float,
 * whose strtod value cast to float is (float)d. With as_float this is
 * exactly how the reader (jansson's strtod, then a cast) will see it. */
void brg_json_format_number(double d, int as_float, char *buf, size_t size);

#endif /* BRIGADE_MODEL_JSON_H */
