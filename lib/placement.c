/* brigade: binding worker threads near their devices (being written). */
#include "device-impl.h"
#include "internal.h"

brg_status brg_device_bind_thread(const brg_device *dev, int index, int count)
{
    (void)dev;
    (void)index;
    (void)count;
    return BRG_OK;
}
