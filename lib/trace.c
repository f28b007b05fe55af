/* brigade: trace (being written). */
#include "internal.h"
