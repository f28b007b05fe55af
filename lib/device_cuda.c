/* brigade: device_cuda (being written). */
#include "internal.h"
