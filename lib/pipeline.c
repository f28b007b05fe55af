/* brigade: pipeline (being written). */
#include "internal.h"
