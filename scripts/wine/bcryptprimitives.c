/* bcryptprimitives.dll for Wine 8.0 (Debian 12), which lacks it: Rust's std (1.78 and later)
 * gets its random bytes from ProcessPrng there, and a test binary without it exits at once
 * (status 53, no output). ProcessPrng is given on top of advapi32's SystemFunction036
 * (RtlGenRandom), which Wine has. Built and installed by scripts/test-all.d/platforms.sh; used
 * only under Wine, never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
