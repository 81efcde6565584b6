/*
 * fake_nvml.c - a TEST DOUBLE for NVIDIA's libnvidia-ml.so.1 (NVML).
 *
 * gpufleet's tests build this file into a shared library named
 * libnvidia-ml.so.1 and put its folder first on LD_LIBRARY_PATH, so the real
 * `pynvml` (nvidia-ml-py) loads it instead of the real NVML.  All state comes
 * from a JSON profile named by the environment variable
 * GPUFLEET_FAKE_NVML_PROFILE (see tests/fakenvml/README.md for the format).
 *
 * It stands in for GPU hardware that CI machines lack.  It is never installed
 * by a role outside a test.
 *
 * Build (plain C99 + libc, nothing else):
 *   cc -std=c99 -O2 -shared -fPIC -fvisibility=hidden \
 *      -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 fake_nvml.c
 *
 * Only the NVML entry points listed in the README are exported; any other
 * symbol is absent, so pynvml raises NVMLError_FunctionNotFound for it, as it
 * does with an older real driver.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ NVML types */
typedef int nvmlReturn_t;
typedef struct fake_gpu *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999
};

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

#define NVML_MEMORY_V2_VERSION ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24)))

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t; /* layout of nvmlProcessInfo_v2_t == _v3_t */

#define MIB 1048576ULL

/* nvmlFieldValue_t (nvml.h): the value union is 8 bytes, so the struct is 40 bytes on LP64. */
typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType; /* nvmlValueType_t */
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230

/* ------------------------------------------------------------ error strings */
static const struct {
    int code;
    const char *name;
    const char *text;
} k_errors[] = {
    {NVML_SUCCESS, "SUCCESS", "Success"},
    {NVML_ERROR_UNINITIALIZED, "UNINITIALIZED", "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED", "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "NO_PERMISSION", "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "ALREADY_INITIALIZED", "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "NOT_FOUND", "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "INSUFFICIENT_SIZE", "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "INSUFFICIENT_POWER", "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED", "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "TIMEOUT", "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "IRQ_ISSUE", "Interrupt request issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "FUNCTION_NOT_FOUND", "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "CORRUPTED_INFOROM", "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU_IS_LOST", "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "RESET_REQUIRED", "GPU requires restart"},
    {NVML_ERROR_OPERATING_SYSTEM, "OPERATING_SYSTEM", "The operating system has blocked the request."},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LIB_RM_VERSION_MISMATCH", "RM has detected an NVML/RM version mismatch."},
    {NVML_ERROR_IN_USE, "IN_USE", "In use by another client"},
    {NVML_ERROR_MEMORY, "MEMORY", "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "NO_DATA", "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, "VGPU_ECC_NOT_SUPPORTED", "ECC is not supported for vGPU"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES", "Insufficient resources"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "FREQ_NOT_SUPPORTED", "Frequency not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ARGUMENT_VERSION_MISMATCH", "Argument version mismatch"},
    {NVML_ERROR_DEPRECATED, "DEPRECATED", "Requested functionality has been deprecated"},
    {NVML_ERROR_NOT_READY, "NOT_READY", "System is not ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "GPU_NOT_FOUND", "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "INVALID_STATE", "Invalid state"},
    {NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, "RESET_TYPE_NOT_SUPPORTED", "Reset type not supported"},
    {NVML_ERROR_UNKNOWN, "UNKNOWN", "Unknown Error"},
};

#define N_ERRORS (sizeof(k_errors) / sizeof(k_errors[0]))

/* ---------------------------------------------------------- tiny JSON parser */
enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jnode {
    int type;
    int b;             /* J_BOOL */
    char *s;           /* J_STR: value; J_NUM: literal text */
    struct jnode **v;  /* J_ARR / J_OBJ children */
    char **k;          /* J_OBJ keys */
    size_t n, cap;
} jnode;

typedef struct {
    const char *p;
    const char *start;
    char err[160];
    int depth;
} jparser;

static void jfree(jnode *j)
{
    size_t i;
    if (!j)
        return;
    for (i = 0; i < j->n; i++) {
        jfree(j->v[i]);
        if (j->k)
            free(j->k[i]);
    }
    free(j->v);
    free(j->k);
    free(j->s);
    free(j);
}

static void jerr(jparser *ps, const char *msg)
{
    if (ps->err[0])
        return;
    snprintf(ps->err, sizeof ps->err, "%s at byte %ld", msg, (long)(ps->p - ps->start));
}

static void jskip(jparser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
        ps->p++;
}

static jnode *jnew(int type)
{
    jnode *j = calloc(1, sizeof *j);
    if (j)
        j->type = type;
    return j;
}

static int jpush(jnode *j, char *key, jnode *child)
{
    if (j->n == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 8;
        jnode **v = realloc(j->v, cap * sizeof *v);
        if (!v)
            return 0;
        j->v = v;
        if (j->type == J_OBJ) {
            char **k = realloc(j->k, cap * sizeof *k);
            if (!k)
                return 0;
            j->k = k;
        }
        j->cap = cap;
    }
    j->v[j->n] = child;
    if (j->type == J_OBJ)
        j->k[j->n] = key;
    j->n++;
    return 1;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses a JSON string literal (ps->p at the opening quote) into malloc'd UTF-8. */
static char *jparse_string(jparser *ps)
{
    size_t cap = 32, n = 0;
    char *out = malloc(cap);
    if (!out) {
        jerr(ps, "out of memory");
        return NULL;
    }
    ps->p++; /* opening quote */
    for (;;) {
        unsigned long cp;
        unsigned char c = (unsigned char)*ps->p;
        if (n + 5 > cap) {
            char *o2 = realloc(out, cap *= 2);
            if (!o2) {
                free(out);
                jerr(ps, "out of memory");
                return NULL;
            }
            out = o2;
        }
        if (c == '\0' || c < 0x20) {
            free(out);
            jerr(ps, "unterminated string or control character in string");
            return NULL;
        }
        ps->p++;
        if (c == '"')
            break;
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        c = (unsigned char)*ps->p++;
        switch (c) {
        case '"': out[n++] = '"'; break;
        case '\\': out[n++] = '\\'; break;
        case '/': out[n++] = '/'; break;
        case 'b': out[n++] = '\b'; break;
        case 'f': out[n++] = '\f'; break;
        case 'n': out[n++] = '\n'; break;
        case 'r': out[n++] = '\r'; break;
        case 't': out[n++] = '\t'; break;
        case 'u': {
            int i;
            cp = 0;
            for (i = 0; i < 4; i++) {
                int h = hexval((unsigned char)ps->p[i]);
                if (h < 0) {
                    free(out);
                    jerr(ps, "bad \\u escape");
                    return NULL;
                }
                cp = cp * 16 + (unsigned long)h;
            }
            ps->p += 4;
            /* surrogate pairs are not combined; profiles are ASCII in practice */
            if (cp < 0x80) {
                out[n++] = (char)cp;
            } else if (cp < 0x800) {
                out[n++] = (char)(0xC0 | (cp >> 6));
                out[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                out[n++] = (char)(0xE0 | (cp >> 12));
                out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                out[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            free(out);
            jerr(ps, "bad escape in string");
            return NULL;
        }
    }
    out[n] = '\0';
    return out;
}

static jnode *jparse_value(jparser *ps);

static jnode *jparse_container(jparser *ps, int type)
{
    char close = type == J_OBJ ? '}' : ']';
    jnode *j = jnew(type);
    if (!j) {
        jerr(ps, "out of memory");
        return NULL;
    }
    if (++ps->depth > 64) {
        jerr(ps, "nesting too deep");
        jfree(j);
        return NULL;
    }
    ps->p++; /* '{' or '[' */
    jskip(ps);
    if (*ps->p == close) {
        ps->p++;
        ps->depth--;
        return j;
    }
    for (;;) {
        char *key = NULL;
        jnode *child;
        jskip(ps);
        if (type == J_OBJ) {
            if (*ps->p != '"') {
                jerr(ps, "expected a string key");
                jfree(j);
                return NULL;
            }
            key = jparse_string(ps);
            if (!key) {
                jfree(j);
                return NULL;
            }
            jskip(ps);
            if (*ps->p != ':') {
                jerr(ps, "expected ':'");
                free(key);
                jfree(j);
                return NULL;
            }
            ps->p++;
        }
        child = jparse_value(ps);
        if (!child || !jpush(j, key, child)) {
            jerr(ps, "out of memory");
            free(key);
            jfree(child);
            jfree(j);
            return NULL;
        }
        jskip(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            ps->depth--;
            return j;
        }
        jerr(ps, type == J_OBJ ? "expected ',' or '}'" : "expected ',' or ']'");
        jfree(j);
        return NULL;
    }
}

static jnode *jparse_value(jparser *ps)
{
    jnode *j;
    jskip(ps);
    switch (*ps->p) {
    case '{':
        return jparse_container(ps, J_OBJ);
    case '[':
        return jparse_container(ps, J_ARR);
    case '"':
        j = jnew(J_STR);
        if (!j)
            return NULL;
        j->s = jparse_string(ps);
        if (!j->s) {
            jfree(j);
            return NULL;
        }
        return j;
    default:
        break;
    }
    if (strncmp(ps->p, "true", 4) == 0 || strncmp(ps->p, "false", 5) == 0) {
        j = jnew(J_BOOL);
        if (!j)
            return NULL;
        j->b = ps->p[0] == 't';
        ps->p += j->b ? 4 : 5;
        return j;
    }
    if (strncmp(ps->p, "null", 4) == 0) {
        ps->p += 4;
        return jnew(J_NULL);
    }
    if (*ps->p == '-' || isdigit((unsigned char)*ps->p)) {
        const char *b = ps->p;
        size_t len;
        if (*ps->p == '-')
            ps->p++;
        while (isdigit((unsigned char)*ps->p) || *ps->p == '.' || *ps->p == 'e' || *ps->p == 'E' ||
               *ps->p == '+' || *ps->p == '-')
            ps->p++;
        len = (size_t)(ps->p - b);
        j = jnew(J_NUM);
        if (!j)
            return NULL;
        j->s = malloc(len + 1);
        if (!j->s) {
            jfree(j);
            return NULL;
        }
        memcpy(j->s, b, len);
        j->s[len] = '\0';
        return j;
    }
    jerr(ps, "unexpected character");
    return NULL;
}

static jnode *jparse_document(const char *text, char *err, size_t errlen)
{
    jparser ps;
    jnode *root;
    memset(&ps, 0, sizeof ps);
    ps.p = ps.start = text;
    root = jparse_value(&ps);
    if (root) {
        jskip(&ps);
        if (*ps.p != '\0') {
            jerr(&ps, "trailing characters after the JSON value");
            jfree(root);
            root = NULL;
        }
    }
    if (!root)
        snprintf(err, errlen, "%s", ps.err[0] ? ps.err : "parse error");
    return root;
}

static jnode *jget(const jnode *obj, const char *key)
{
    size_t i;
    if (!obj || obj->type != J_OBJ)
        return NULL;
    for (i = 0; i < obj->n; i++)
        if (strcmp(obj->k[i], key) == 0)
            return obj->v[i]->type == J_NULL ? NULL : obj->v[i];
    return NULL;
}

static jnode *jat(const jnode *arr, size_t i)
{
    if (!arr || arr->type != J_ARR || i >= arr->n)
        return NULL;
    return arr->v[i]->type == J_NULL ? NULL : arr->v[i];
}

/* Unsigned integer from a JSON number, bool, or a string such as "0x233010DE". */
static int ju64(const jnode *j, unsigned long long *out)
{
    char *end;
    if (!j)
        return 0;
    if (j->type == J_BOOL) {
        *out = (unsigned long long)j->b;
        return 1;
    }
    if (j->type != J_NUM && j->type != J_STR)
        return 0;
    if (j->s[0] == '-')
        return 0;
    if (j->type == J_NUM && strpbrk(j->s, ".eE")) {
        double d = strtod(j->s, &end);
        if (*end || d < 0)
            return 0;
        *out = (unsigned long long)(d + 0.5);
        return 1;
    }
    *out = strtoull(j->s, &end, j->type == J_STR ? 0 : 10);
    return *end == '\0' && end != j->s;
}

static int jint(const jnode *j, long *out)
{
    char *end;
    if (!j)
        return 0;
    if (j->type == J_BOOL) {
        *out = j->b;
        return 1;
    }
    if (j->type != J_NUM && j->type != J_STR)
        return 0;
    *out = strtol(j->s, &end, j->type == J_STR ? 0 : 10);
    return *end == '\0' && end != j->s;
}

static int juint(const jnode *j, unsigned int *out)
{
    unsigned long long v;
    if (!ju64(j, &v) || v > 0xFFFFFFFFULL)
        return 0;
    *out = (unsigned int)v;
    return 1;
}

static const char *jstr(const jnode *j)
{
    return j && j->type == J_STR ? j->s : NULL;
}

/* --------------------------------------------------------------- state */
struct fake_gpu {
    unsigned int index;
    const jnode *j;
};

static jnode *g_profile;
static struct fake_gpu *g_gpus;
static unsigned int g_ngpus;
static unsigned int g_refcount;

static void warn(const char *fmt, ...)
{
    va_list ap;
    fputs("fake-nvml: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* An error given by name ("GPU_IS_LOST", "NVML_ERROR_GPU_IS_LOST") or number. */
static int parse_error(const jnode *j, int *code)
{
    const char *s = jstr(j);
    long v;
    size_t i;
    if (s) {
        if (strncmp(s, "NVML_ERROR_", 11) == 0)
            s += 11;
        else if (strncmp(s, "NVML_", 5) == 0)
            s += 5;
        for (i = 0; i < N_ERRORS; i++) {
            if (strcmp(s, k_errors[i].name) == 0) {
                *code = k_errors[i].code;
                return 1;
            }
        }
    }
    if (jint(j, &v)) {
        *code = (int)v;
        return 1;
    }
    return 0;
}

/* Function names in "errors"/"unsupported" may carry a _vN suffix; compare without it. */
static size_t base_len(const char *name)
{
    size_t n = strlen(name), i = n;
    while (i > 0 && isdigit((unsigned char)name[i - 1]))
        i--;
    if (i < n && i >= 2 && name[i - 1] == 'v' && name[i - 2] == '_')
        return i - 2;
    return n;
}

static int same_function(const char *a, const char *b)
{
    size_t la = base_len(a), lb = base_len(b);
    return la == lb && strncmp(a, b, la) == 0;
}

/* An error the profile injects for function `fn` on object `scope` (profile or GPU). */
static int injected(const jnode *scope, const char *fn, int *code)
{
    const jnode *errs = jget(scope, "errors");
    const jnode *uns = jget(scope, "unsupported");
    size_t i;
    if (errs && errs->type == J_OBJ) {
        for (i = 0; i < errs->n; i++) {
            if (same_function(errs->k[i], fn) && parse_error(errs->v[i], code)) {
                return 1;
            }
        }
    }
    if (uns && uns->type == J_ARR) {
        for (i = 0; i < uns->n; i++) {
            const char *s = jstr(uns->v[i]);
            if (s && same_function(s, fn)) {
                *code = NVML_ERROR_NOT_SUPPORTED;
                return 1;
            }
        }
    }
    return 0;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    if (!f)
        return NULL;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *b2;
            cap = cap ? cap * 2 : 16384;
            b2 = realloc(buf, cap);
            if (!b2) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b2;
        }
        got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void unload_profile(void)
{
    jfree(g_profile);
    free(g_gpus);
    g_profile = NULL;
    g_gpus = NULL;
    g_ngpus = 0;
}

static nvmlReturn_t load_profile(void)
{
    const char *path = getenv("GPUFLEET_FAKE_NVML_PROFILE");
    char err[200];
    /* Test containers (molecule, demo fleet) have no way to pass the variable to every process
     * Ansible starts, so the double also reads a profile at a fixed path inside such a container. */
    static const char container_profile[] = "/etc/gpufleet-fake-nvml/profile.json";
    char *text;
    const jnode *gpus;
    unsigned int i;

    unload_profile();
    if ((!path || !*path) && access(container_profile, R_OK) == 0)
        path = container_profile;
    if (!path || !*path) {
        warn("GPUFLEET_FAKE_NVML_PROFILE is not set; this library is a test double");
        return NVML_ERROR_UNKNOWN;
    }
    text = read_file(path);
    if (!text) {
        warn("cannot read profile %s", path);
        return NVML_ERROR_UNKNOWN;
    }
    g_profile = jparse_document(text, err, sizeof err);
    free(text);
    if (!g_profile || g_profile->type != J_OBJ) {
        warn("profile %s is not a JSON object: %s", path, g_profile ? "wrong type" : err);
        unload_profile();
        return NVML_ERROR_UNKNOWN;
    }
    gpus = jget(g_profile, "gpus");
    if (gpus && gpus->type == J_ARR && gpus->n > 0) {
        g_gpus = calloc(gpus->n, sizeof *g_gpus);
        if (!g_gpus) {
            unload_profile();
            return NVML_ERROR_MEMORY;
        }
        for (i = 0; i < gpus->n; i++) {
            g_gpus[i].index = i;
            g_gpus[i].j = gpus->v[i];
        }
        g_ngpus = (unsigned int)gpus->n;
    }
    return NVML_SUCCESS;
}

/* Common preamble for system calls: initialised, no injected error. */
static nvmlReturn_t sys_gate(const char *fn)
{
    int code;
    if (!g_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (injected(g_profile, fn, &code))
        return code;
    return NVML_SUCCESS;
}

static int valid_handle(nvmlDevice_t d)
{
    return d && g_gpus && d >= g_gpus && d < g_gpus + g_ngpus;
}

static int gpu_lost(const struct fake_gpu *g)
{
    unsigned long long lost = 0;
    return ju64(jget(g->j, "lost"), &lost) && lost;
}

/*
 * Common preamble for device calls: initialised, valid handle, GPU not lost,
 * no injected error, and (if `field` is given) the field present in the profile;
 * a missing or null field means NVML_ERROR_NOT_SUPPORTED.
 */
static nvmlReturn_t dev_gate(nvmlDevice_t d, const char *fn, const char *field, const jnode **out)
{
    int code;
    if (!g_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!valid_handle(d))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu_lost(d))
        return NVML_ERROR_GPU_IS_LOST;
    if (injected(g_profile, fn, &code) || injected(d->j, fn, &code))
        return code;
    if (field) {
        *out = jget(d->j, field);
        if (!*out)
            return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t put_str(const char *v, char *buf, unsigned int len)
{
    size_t n;
    if (!v)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = strlen(v);
    if ((size_t)len < n + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, v, n + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t dev_str(nvmlDevice_t d, const char *fn, const char *field, char *buf, unsigned int len)
{
    const jnode *j = NULL;
    nvmlReturn_t r = dev_gate(d, fn, field, &j);
    if (r)
        return r;
    return put_str(jstr(j), buf, len);
}

static nvmlReturn_t dev_uint(nvmlDevice_t d, const char *fn, const char *field, unsigned int *out)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, field, &j);
    if (r)
        return r;
    return juint(j, out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

/* A sub-field of an object field, e.g. pcie.curr_width. */
static nvmlReturn_t dev_sub_uint(nvmlDevice_t d, const char *fn, const char *field, const char *sub,
                                 unsigned int *out)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, field, &j);
    if (r)
        return r;
    return juint(jget(j, sub), out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

/* ----------------------------------------------------------- init / system */
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    int code;
    nvmlReturn_t r;
    (void)flags;
    if (g_refcount) {
        g_refcount++;
        return NVML_SUCCESS;
    }
    r = load_profile();
    if (r)
        return r;
    if (jget(g_profile, "init_error")) {
        if (!parse_error(jget(g_profile, "init_error"), &code)) {
            warn("init_error is not an NVML error name or number");
            code = NVML_ERROR_UNKNOWN;
        }
        if (code != NVML_SUCCESS) {
            unload_profile();
            return code;
        }
    }
    g_refcount = 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return nvmlInitWithFlags(0);
}

EXPORT nvmlReturn_t nvmlInit(void)
{
    return nvmlInitWithFlags(0);
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (!g_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (--g_refcount == 0)
        unload_profile();
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    size_t i;
    for (i = 0; i < N_ERRORS; i++)
        if (k_errors[i].code == result)
            return k_errors[i].text;
    return "Unknown Error";
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t r = sys_gate("nvmlSystemGetDriverVersion");
    return r ? r : put_str(jstr(jget(g_profile, "driver_version")), version, length);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    nvmlReturn_t r = sys_gate("nvmlSystemGetNVMLVersion");
    return r ? r : put_str(jstr(jget(g_profile, "nvml_version")), version, length);
}

static nvmlReturn_t cuda_version(const char *fn, int *out)
{
    long v;
    nvmlReturn_t r;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = sys_gate(fn);
    if (r)
        return r;
    if (!jint(jget(g_profile, "cuda_driver_version"), &v))
        return NVML_ERROR_NOT_SUPPORTED;
    *out = (int)v;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    return cuda_version("nvmlSystemGetCudaDriverVersion", v);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    return cuda_version("nvmlSystemGetCudaDriverVersion_v2", v);
}

/* --------------------------------------------------------------- handles */
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    nvmlReturn_t r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = sys_gate("nvmlDeviceGetCount");
    if (r)
        return r;
    *count = g_ngpus;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return nvmlDeviceGetCount_v2(count);
}

static nvmlReturn_t handle_of(struct fake_gpu *g, const char *fn, nvmlDevice_t *device)
{
    int code;
    if (gpu_lost(g))
        return NVML_ERROR_GPU_IS_LOST;
    if (injected(g->j, fn, &code))
        return code;
    *device = g;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t r;
    if (!device)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = sys_gate("nvmlDeviceGetHandleByIndex");
    if (r)
        return r;
    if (index >= g_ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    return handle_of(&g_gpus[index], "nvmlDeviceGetHandleByIndex", device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    unsigned int i;
    nvmlReturn_t r;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = sys_gate("nvmlDeviceGetHandleByUUID");
    if (r)
        return r;
    for (i = 0; i < g_ngpus; i++) {
        const char *u = jstr(jget(g_gpus[i].j, "uuid"));
        if (u && strcmp(u, uuid) == 0)
            return handle_of(&g_gpus[i], "nvmlDeviceGetHandleByUUID", device);
    }
    return NVML_ERROR_NOT_FOUND;
}

static int parse_bus_id(const char *s, unsigned int *dom, unsigned int *bus, unsigned int *dev, unsigned int *fn)
{
    char tail;
    *fn = 0;
    if (sscanf(s, "%x:%x:%x.%x%c", dom, bus, dev, fn, &tail) == 4)
        return 1;
    *dom = 0;
    return sscanf(s, "%x:%x.%x%c", bus, dev, fn, &tail) == 3;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    unsigned int i, d1, b1, v1, f1, d2, b2, v2, f2;
    nvmlReturn_t r;
    if (!pciBusId || !device || !parse_bus_id(pciBusId, &d1, &b1, &v1, &f1))
        return NVML_ERROR_INVALID_ARGUMENT;
    r = sys_gate("nvmlDeviceGetHandleByPciBusId");
    if (r)
        return r;
    for (i = 0; i < g_ngpus; i++) {
        const char *s = jstr(jget(jget(g_gpus[i].j, "pci"), "bus_id"));
        if (s && parse_bus_id(s, &d2, &b2, &v2, &f2) && d1 == d2 && b1 == b2 && v1 == v2 && f1 == f2)
            return handle_of(&g_gpus[i], "nvmlDeviceGetHandleByPciBusId", device);
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index)
{
    nvmlReturn_t r;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetIndex", NULL, NULL);
    if (r)
        return r;
    *index = d->index;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------ identity */
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length)
{
    return dev_str(d, "nvmlDeviceGetName", "name", name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length)
{
    return dev_str(d, "nvmlDeviceGetUUID", "uuid", uuid, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *serial, unsigned int length)
{
    return dev_str(d, "nvmlDeviceGetSerial", "serial", serial, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t d, char *version, unsigned int length)
{
    return dev_str(d, "nvmlDeviceGetVbiosVersion", "vbios_version", version, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
    return dev_uint(d, "nvmlDeviceGetMinorNumber", "minor_number", minor);
}

static nvmlReturn_t pci_info(nvmlDevice_t d, const char *fn, nvmlPciInfo_t *pci)
{
    const jnode *j = NULL;
    const char *bus_id;
    unsigned int dom, bus, dev, func;
    nvmlReturn_t r;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, "pci", &j);
    if (r)
        return r;
    bus_id = jstr(jget(j, "bus_id"));
    if (!bus_id || !parse_bus_id(bus_id, &dom, &bus, &dev, &func))
        return NVML_ERROR_UNKNOWN;
    memset(pci, 0, sizeof *pci);
    pci->domain = dom;
    pci->bus = bus;
    pci->device = dev;
    juint(jget(j, "device_id"), &pci->pciDeviceId);
    juint(jget(j, "subsystem_id"), &pci->pciSubSystemId);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", dom, bus, dev, func);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", dom & 0xFFFFu, bus & 0xFFu,
             dev & 0xFFu, func & 0xFu);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    return pci_info(d, "nvmlDeviceGetPciInfo_v3", pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    return pci_info(d, "nvmlDeviceGetPciInfo_v2", pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    const jnode *j = NULL;
    long ma, mi;
    nvmlReturn_t r;
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetCudaComputeCapability", "compute_capability", &j);
    if (r)
        return r;
    if (!jint(jat(j, 0), &ma) || !jint(jat(j, 1), &mi))
        return NVML_ERROR_UNKNOWN;
    *major = (int)ma;
    *minor = (int)mi;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------ memory */
static nvmlReturn_t memory_mib(nvmlDevice_t d, const char *fn, unsigned long long *total,
                               unsigned long long *reserved, unsigned long long *used)
{
    const jnode *j = NULL;
    nvmlReturn_t r = dev_gate(d, fn, "memory_mib", &j);
    if (r)
        return r;
    *reserved = 0;
    *used = 0;
    if (!ju64(jget(j, "total"), total))
        return NVML_ERROR_UNKNOWN;
    ju64(jget(j, "reserved"), reserved);
    ju64(jget(j, "used"), used);
    if (*reserved + *used > *total)
        return NVML_ERROR_UNKNOWN;
    *total *= MIB;
    *reserved *= MIB;
    *used *= MIB;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory)
{
    unsigned long long total, reserved, used;
    nvmlReturn_t r;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = memory_mib(d, "nvmlDeviceGetMemoryInfo", &total, &reserved, &used);
    if (r)
        return r;
    /* v1 counts driver-reserved memory as used, like the real library */
    memory->total = total;
    memory->used = reserved + used;
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *memory)
{
    unsigned long long total, reserved, used;
    nvmlReturn_t r;
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != NVML_MEMORY_V2_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    r = memory_mib(d, "nvmlDeviceGetMemoryInfo_v2", &total, &reserved, &used);
    if (r)
        return r;
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

/* -------------------------------------------------------------- PCIe */
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v)
{
    return dev_sub_uint(d, "nvmlDeviceGetCurrPcieLinkGeneration", "pcie", "curr_gen", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v)
{
    return dev_sub_uint(d, "nvmlDeviceGetMaxPcieLinkGeneration", "pcie", "max_gen", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v)
{
    return dev_sub_uint(d, "nvmlDeviceGetCurrPcieLinkWidth", "pcie", "curr_width", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v)
{
    return dev_sub_uint(d, "nvmlDeviceGetMaxPcieLinkWidth", "pcie", "max_width", v);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetGpuMaxPcieLinkGeneration", "pcie", &j);
    if (r)
        return r;
    /* what the GPU itself can do; defaults to the link maximum */
    if (juint(jget(j, "gpu_max_gen"), v) || juint(jget(j, "max_gen"), v))
        return NVML_SUCCESS;
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t d, unsigned int *v)
{
    return dev_sub_uint(d, "nvmlDeviceGetPcieReplayCounter", "pcie", "replay_counter", v);
}

/* ------------------------------------------------------------ clocks */
static const char *clock_key(int type)
{
    static const char *const keys[] = {"graphics", "sm", "mem", "video"};
    return type >= 0 && type < 4 ? keys[type] : NULL;
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *clock)
{
    if (!clock_key(type))
        return NVML_ERROR_INVALID_ARGUMENT;
    return dev_sub_uint(d, "nvmlDeviceGetClockInfo", "clocks_mhz", clock_key(type), clock);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t d, int type, unsigned int *clock)
{
    if (!clock_key(type))
        return NVML_ERROR_INVALID_ARGUMENT;
    return dev_sub_uint(d, "nvmlDeviceGetMaxClockInfo", "max_clocks_mhz", clock_key(type), clock);
}

/* Applications clocks (nvidia-smi -ac) and the board's defaults, per clock type. */
EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, int type, unsigned int *clock)
{
    if (!clock_key(type))
        return NVML_ERROR_INVALID_ARGUMENT;
    return dev_sub_uint(d, "nvmlDeviceGetApplicationsClock", "applications_clocks_mhz", clock_key(type), clock);
}

EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t d, int type, unsigned int *clock)
{
    if (!clock_key(type))
        return NVML_ERROR_INVALID_ARGUMENT;
    return dev_sub_uint(d, "nvmlDeviceGetDefaultApplicationsClock", "default_applications_clocks_mhz",
                        clock_key(type), clock);
}

static nvmlReturn_t event_reasons(nvmlDevice_t d, const char *fn, unsigned long long *reasons)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!reasons)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, "clocks_event_reasons", &j);
    if (r)
        return r;
    return ju64(j, reasons) ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *reasons)
{
    return event_reasons(d, "nvmlDeviceGetCurrentClocksEventReasons", reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *reasons)
{
    return event_reasons(d, "nvmlDeviceGetCurrentClocksThrottleReasons", reasons);
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t d, int *pstate)
{
    unsigned int v;
    nvmlReturn_t r = dev_uint(d, "nvmlDeviceGetPerformanceState", "performance_state", &v);
    if (r == NVML_SUCCESS) {
        if (!pstate)
            return NVML_ERROR_INVALID_ARGUMENT;
        *pstate = (int)v;
    }
    return r;
}

/* ------------------------------------------------- thermals and power */
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp)
{
    if (sensor != 0) /* NVML_TEMPERATURE_GPU is the only sensor */
        return NVML_ERROR_INVALID_ARGUMENT;
    return dev_uint(d, "nvmlDeviceGetTemperature", "temperature_c", temp);
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t d, unsigned int *speed)
{
    return dev_uint(d, "nvmlDeviceGetFanSpeed", "fan_speed_pct", speed);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    return dev_uint(d, "nvmlDeviceGetPowerUsage", "power_usage_mw", mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    return dev_uint(d, "nvmlDeviceGetEnforcedPowerLimit", "enforced_power_limit_mw", mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw)
{
    return dev_uint(d, "nvmlDeviceGetPowerManagementLimit", "power_limit_mw", mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *mw)
{
    return dev_uint(d, "nvmlDeviceGetPowerManagementDefaultLimit", "default_power_limit_mw", mw);
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetUtilizationRates", "utilization_pct", &j);
    if (r)
        return r;
    if (!juint(jget(j, "gpu"), &u->gpu) || !juint(jget(j, "memory"), &u->memory))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* --------------------------------------------------------------- modes */
static nvmlReturn_t mode_pair(nvmlDevice_t d, const char *fn, const char *field, unsigned int *cur,
                              unsigned int *pending)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!cur || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, field, &j);
    if (r)
        return r;
    if (!juint(jget(j, "current"), cur))
        return NVML_ERROR_UNKNOWN;
    if (!juint(jget(j, "pending"), pending))
        *pending = *cur;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode)
{
    unsigned int v;
    nvmlReturn_t r;
    if (!mode)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_uint(d, "nvmlDeviceGetPersistenceMode", "persistence_mode", &v);
    if (r == NVML_SUCCESS)
        *mode = v ? 1 : 0;
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pending)
{
    return mode_pair(d, "nvmlDeviceGetMigMode", "mig_mode", cur, pending);
}

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *cur, int *pending)
{
    unsigned int c, p;
    nvmlReturn_t r;
    if (!cur || !pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = mode_pair(d, "nvmlDeviceGetEccMode", "ecc_mode", &c, &p);
    if (r == NVML_SUCCESS) {
        *cur = c ? 1 : 0;
        *pending = p ? 1 : 0;
    }
    return r;
}

/* MIG instances are not modelled: the maximum is reported, no MIG device exists. */
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count)
{
    return dev_sub_uint(d, "nvmlDeviceGetMaxMigDeviceCount", "mig_mode", "max_devices", count);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int index, nvmlDevice_t *mig)
{
    unsigned int max;
    nvmlReturn_t r;
    if (!mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_sub_uint(d, "nvmlDeviceGetMigDeviceHandleByIndex", "mig_mode", "max_devices", &max);
    if (r)
        return r;
    return index < max ? NVML_ERROR_NOT_FOUND : NVML_ERROR_INVALID_ARGUMENT;
}

/* ------------------------------------------------------------- health */
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int errorType, int counterType,
                                                unsigned long long *count)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!count || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetTotalEccErrors", "ecc_errors", &j);
    if (r)
        return r;
    j = jget(j, counterType == 0 ? "volatile" : "aggregate");
    if (!ju64(jget(j, errorType == 0 ? "corrected" : "uncorrected"), count))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* An entry of retired_pages.<cause>: an address, or {"address": A, "timestamp": T}. */
static void page_entry(const jnode *e, unsigned long long *addr, unsigned long long *ts)
{
    *addr = 0;
    *ts = 0;
    if (e && e->type == J_OBJ) {
        ju64(jget(e, "address"), addr);
        ju64(jget(e, "timestamp"), ts);
    } else {
        ju64(e, addr);
    }
}

static nvmlReturn_t retired_pages(nvmlDevice_t d, const char *fn, int cause, unsigned int *count,
                                  unsigned long long *addresses, unsigned long long *timestamps)
{
    const jnode *j = NULL, *list;
    unsigned int n, i;
    nvmlReturn_t r;
    if (!count || cause < 0 || cause > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, "retired_pages", &j);
    if (r)
        return r;
    list = jget(j, cause == 0 ? "single_bit_ecc" : "double_bit_ecc");
    n = list && list->type == J_ARR ? (unsigned int)list->n : 0;
    if (*count < n || (n > 0 && !addresses)) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i = 0; i < n; i++) {
        unsigned long long a, t;
        page_entry(list->v[i], &a, &t);
        addresses[i] = a;
        if (timestamps)
            timestamps[i] = t;
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int *count,
                                              unsigned long long *addresses)
{
    return retired_pages(d, "nvmlDeviceGetRetiredPages", cause, count, addresses, NULL);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t d, int cause, unsigned int *count,
                                                 unsigned long long *addresses, unsigned long long *timestamps)
{
    return retired_pages(d, "nvmlDeviceGetRetiredPages_v2", cause, count, addresses, timestamps);
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending)
{
    const jnode *j = NULL;
    unsigned int v = 0;
    nvmlReturn_t r;
    if (!pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetRetiredPagesPendingStatus", "retired_pages", &j);
    if (r)
        return r;
    juint(jget(j, "pending"), &v);
    *pending = v ? 1 : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corrRows, unsigned int *uncRows,
                                              unsigned int *isPending, unsigned int *failureOccurred)
{
    const jnode *j = NULL;
    nvmlReturn_t r;
    if (!corrRows || !uncRows || !isPending || !failureOccurred)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetRemappedRows", "remapped_rows", &j);
    if (r)
        return r;
    *corrRows = *uncRows = *isPending = *failureOccurred = 0;
    juint(jget(j, "correctable"), corrRows);
    juint(jget(j, "uncorrectable"), uncRows);
    juint(jget(j, "pending"), isPending);
    juint(jget(j, "failure"), failureOccurred);
    *isPending = *isPending ? 1 : 0;
    *failureOccurred = *failureOccurred ? 1 : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *isActive)
{
    const jnode *j = NULL, *inactive;
    unsigned int count = 0, v;
    size_t i;
    nvmlReturn_t r;
    if (!isActive)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetNvLinkState", "nvlink", &j);
    if (r)
        return r;
    if (!juint(jget(j, "count"), &count) || count == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = 1;
    inactive = jget(j, "inactive");
    if (inactive && inactive->type == J_ARR)
        for (i = 0; i < inactive->n; i++)
            if (juint(inactive->v[i], &v) && v == link)
                *isActive = 0;
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------- processes */
static nvmlReturn_t compute_procs(nvmlDevice_t d, const char *fn, unsigned int *count, nvmlProcessInfo_t *infos)
{
    const jnode *list = NULL;
    unsigned int n, i;
    nvmlReturn_t r;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, fn, NULL, NULL);
    if (r)
        return r;
    list = jget(d->j, "processes");
    n = list && list->type == J_ARR ? (unsigned int)list->n : 0;
    if (*count < n || (n > 0 && !infos)) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (i = 0; i < n; i++) {
        const jnode *p = list->v[i];
        unsigned long long mib = 0;
        memset(&infos[i], 0, sizeof infos[i]);
        juint(jget(p, "pid"), &infos[i].pid);
        infos[i].usedGpuMemory = ju64(jget(p, "used_memory_mib"), &mib) ? mib * MIB : ~0ULL;
        infos[i].gpuInstanceId = 0xFFFFFFFFu;
        infos[i].computeInstanceId = 0xFFFFFFFFu;
        juint(jget(p, "gpu_instance_id"), &infos[i].gpuInstanceId);
        juint(jget(p, "compute_instance_id"), &infos[i].computeInstanceId);
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return compute_procs(d, "nvmlDeviceGetComputeRunningProcesses_v3", count, infos);
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                            nvmlProcessInfo_t *infos)
{
    return compute_procs(d, "nvmlDeviceGetComputeRunningProcesses_v2", count, infos);
}

/* The name of a process listed under any GPU's "processes" (key "name"). */
EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    unsigned int i, p;
    size_t k;
    nvmlReturn_t r = sys_gate("nvmlSystemGetProcessName");
    if (r)
        return r;
    for (i = 0; i < g_ngpus; i++) {
        const jnode *list = jget(g_gpus[i].j, "processes");
        for (k = 0; list && list->type == J_ARR && k < list->n; k++) {
            if (juint(jget(list->v[k], "pid"), &p) && p == pid) {
                const char *s = jstr(jget(list->v[k], "name"));
                return s ? put_str(s, name, length) : NVML_ERROR_NOT_FOUND;
            }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* ------------------------------------------------------- field values */
/* nvmlGpuRecoveryAction_t names (nvml.h NVML_GPU_RECOVERY_ACTION_*), for "recovery_action" given by name. */
static const char *const k_recovery_actions[] = {
    "NONE", "GPU_RESET", "NODE_REBOOT", "DRAIN_P2P", "DRAIN_AND_RESET", "RECOVER_IMEX_DOMAIN", "BUS_RESET",
    "SYSTEM_REBOOT",
};

static int recovery_action(const jnode *j, unsigned int *out)
{
    const char *s = jstr(j);
    size_t i;
    if (s) {
        if (strncmp(s, "NVML_GPU_RECOVERY_ACTION_", 25) == 0)
            s += 25;
        for (i = 0; i < sizeof k_recovery_actions / sizeof k_recovery_actions[0]; i++) {
            if (strcmp(s, k_recovery_actions[i]) == 0) {
                *out = (unsigned int)i;
                return 1;
            }
        }
        return 0;
    }
    return juint(j, out);
}

/*
 * Only NVML_FI_DEV_GET_GPU_RECOVERY_ACTION is modelled (profile key "recovery_action", a name or a number);
 * every other field comes back with its own nvmlReturn NOT_SUPPORTED, as the real call reports a field a
 * GPU does not have. The call itself succeeds, like the real one.
 */
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int valuesCount, nvmlFieldValue_t *values)
{
    const jnode *action;
    unsigned int v;
    int i;
    nvmlReturn_t r;
    if (valuesCount < 0 || (valuesCount > 0 && !values))
        return NVML_ERROR_INVALID_ARGUMENT;
    r = dev_gate(d, "nvmlDeviceGetFieldValues", NULL, NULL);
    if (r)
        return r;
    action = jget(d->j, "recovery_action");
    for (i = 0; i < valuesCount; i++) {
        values[i].timestamp = 0;
        values[i].latencyUsec = 0;
        memset(&values[i].value, 0, sizeof values[i].value);
        values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        if (values[i].fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION && action) {
            if (recovery_action(action, &v)) {
                values[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
                values[i].value.uiVal = v;
                values[i].nvmlReturn = NVML_SUCCESS;
            } else {
                values[i].nvmlReturn = NVML_ERROR_UNKNOWN;
            }
        }
    }
    return NVML_SUCCESS;
}
