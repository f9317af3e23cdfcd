/*
 * bcryptprimitives.dll for Wine 8, which has none: Go's Windows runtime
 * (1.24 and later) loads ProcessPrng from it at start-up and exits without
 * it. Wine's advapi32 has the same generator under its old name,
 * SystemFunction036 (RtlGenRandom). Built by scripts/wine.sh into the
 * test prefix's system32; never part of the product.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
