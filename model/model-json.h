/* What the JSON model reader (model_json.c) and writer
 * (model_json_write.c) share. */
#ifndef BRIGADE_MODEL_JSON_H
#define BRIGADE_MODEL_JSON_H

#include <stddef.h>

#define FORMAT_NAME "brigade-model"
#define FORMAT_VERSION 1

/* The shortest "%.*g" form of d (with a '.' whatever the locale) with at
 * most max_digits digits that strtod reads back to d, or, with as_float,
 * whose strtod value cast to float is (float)d. With as_float this is
 * exactly how the reader (jansson's strtod, then a cast) will see it. */
void brg_json_format_number(double d, int as_float, char *buf, size_t size);

#endif /* BRIGADE_MODEL_JSON_H */
