// SPDX-License-Identifier: GPL-2.0

//! Registration: the link type, the netdev notifier, the device list, and a
//! device's life from `newlink` to `dealloc_driver`.

use super::device::DeviceBox;
use super::netdev::{eui64_from_mac, NetDev};
use super::{Adapter, Driver};
use crate::ffi::bindings as b;
use core::marker::PhantomData;
use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::error::{from_result, to_result};
use kernel::ffi::{c_char, c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, Mutex};
use kernel::types::Opaque;

/// One device on the registry's list.
#[derive(Clone, Copy, PartialEq)]
struct Entry {
    ib: *mut b::ib_device,
    netdev: *mut b::net_device,
}

// SAFETY: `Entry` holds addresses only; they are dereferenced under the rules
// of the RDMA core (a reference taken with `ib_device_try_get`), never because
// the entry moved between threads.
unsafe impl Send for Entry {}

/// Most devices one module instance runs at once.
pub(crate) const MAX_DEVICES: usize = 64;

/// The state behind a [`Registration`], at a fixed address.
#[pin_data]
struct Registry {
    #[pin]
    devices: Mutex<[Option<Entry>; MAX_DEVICES]>,
    #[pin]
    link_ops: Opaque<b::rdma_link_ops>,
    #[pin]
    notifier: Opaque<b::notifier_block>,
    /// `Adapter::<T>::newlink`, so the non-generic C callback can reach `T`.
    newlink: fn(&Registry, &CStr, &NetDev) -> Result,
    /// `Adapter::<T>::netdev_event`, for the same reason.
    netdev_event: unsafe fn(*mut b::ib_device, i32, bool, bool),
    /// `Arc::into_raw` of the driver's `Arc<T::Shared>`, released by `Drop`.
    shared: *const c_void,
    owner: *mut b::module,
    /// Set by `Drop` before it unregisters the netdev notifier.
    unloading: AtomicBool,
}

// SAFETY: the raw pointers are the C registration records, which the RDMA core
// and the netdev notifier chain access under their own locks, and the module
// pointer, which is immutable.
unsafe impl Send for Registry {}
// SAFETY: see `Send`; the device list is behind a mutex.
unsafe impl Sync for Registry {}

/// The one live registry, for the `newlink` callback (see the invariants).
static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(ptr::null_mut());

/// Registration of a software RDMA driver: link type, netdev notifier, and the
/// devices it creates. Dropping it removes every device.
pub(crate) struct Registration<T: Driver> {
    registry: Pin<KBox<Registry>>,
    _t: PhantomData<T>,
}

impl<T: Driver> Registration<T> {
    /// Registers the link type `T::LINK_TYPE` and starts following netdevs.
    ///
    /// Returns `EBUSY` if another registration is live.
    pub(crate) fn new(module: &'static ThisModule, shared: Arc<T::Shared>) -> Result<Self> {
        let registry = KBox::pin_init(
            pin_init!(Registry {
                devices <- kernel::new_mutex!([None; MAX_DEVICES]),
                link_ops: Opaque::uninit(),
                notifier: Opaque::uninit(),
                newlink: Adapter::<T>::newlink,
                netdev_event: Adapter::<T>::netdev_event,
                shared: Arc::into_raw(shared).cast(),
                owner: module.as_ptr().cast(),
                unloading: AtomicBool::new(false),
            }),
            GFP_KERNEL,
        )?;
        let reg_ptr = ptr::from_ref::<Registry>(&registry).cast_mut();
        if REGISTRY
            .compare_exchange(
                ptr::null_mut(),
                reg_ptr,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return Err(EBUSY);
        }
        let ops = registry.link_ops.get();
        let link_ops = b::rdma_link_ops {
            type_: T::LINK_TYPE.as_char_ptr(),
            newlink: Some(newlink_callback),
            ..Default::default()
        };
        // SAFETY: `link_ops` is pinned in `registry`, not yet registered, so
        // ours alone.
        unsafe { ptr::write(ops, link_ops) };
        // SAFETY: the record lives (pinned) until `Drop`, which unregisters
        // it first; `type_` is a `'static` string.
        unsafe { b::rdma_link_register(ops) };

        let nb = registry.notifier.get();
        let notifier = b::notifier_block {
            notifier_call: Some(netdev_event_callback),
            ..Default::default()
        };
        // SAFETY: as for `link_ops`.
        unsafe { ptr::write(nb, notifier) };
        // SAFETY: as for `link_ops`.
        let ret = unsafe { b::register_netdevice_notifier(nb) };
        if ret != 0 {
            // SAFETY: registered above.
            unsafe { b::rdma_link_unregister(ops) };
            REGISTRY.store(ptr::null_mut(), Ordering::Release);
            return Err(Error::from_errno(ret));
        }
        Ok(Self {
            registry,
            _t: PhantomData,
        })
    }

    /// Number of devices currently on the list.
    pub(crate) fn device_count(&self) -> usize {
        self.registry.devices.lock().iter().flatten().count()
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        let reg = &*self.registry;
        // Unregistering the notifier replays DOWN/UNREGISTER for every netdev:
        // ignore them, the devices are removed below.
        reg.unloading.store(true, Ordering::Release);
        // SAFETY: registered in `new`. After this returns no `newlink` runs
        // (the core holds its link-ops lock across the call).
        unsafe { b::rdma_link_unregister(reg.link_ops.get()) };
        // SAFETY: registered in `new`. After this returns no netdev event is
        // delivered.
        unsafe { b::unregister_netdevice_notifier(reg.notifier.get()) };
        // Remove every device. `ib_unregister_device` takes the core's
        // per-device unregistration lock, so for a device someone else is
        // already removing (rdma link delete, NETDEV_UNREGISTER work) it waits
        // until that removal, our `dealloc_driver` included, has returned. The
        // `struct device` reference keeps the memory alive across the call.
        loop {
            let next = {
                let devices = reg.devices.lock();
                devices.iter().flatten().next().map(|e| {
                    // SAFETY: listed devices are alive until `dealloc_driver`
                    // unlists them, which needs the lock we hold.
                    unsafe { b::get_device(ptr::addr_of_mut!((*e.ib).__bindgen_anon_1.dev)) };
                    e.ib
                })
            };
            let Some(ib) = next else { break };
            // (`__bindgen_anon_1.dev` is the `struct device` of the C union
            // `{ struct device dev; struct ib_core_device coredev; }`.)
            // SAFETY: `ib` is a registered device (no `newlink` can run any
            // more) whose memory our `get_device` reference keeps.
            unsafe { b::ib_unregister_device(ib) };
            // SAFETY: drops the `get_device` reference taken above.
            unsafe { b::put_device(ptr::addr_of_mut!((*ib).__bindgen_anon_1.dev)) };
        }
        REGISTRY.store(ptr::null_mut(), Ordering::Release);
        // SAFETY: from `Arc::into_raw` in `new`; every device is gone, and
        // with them every borrow of it.
        drop(unsafe { Arc::from_raw(reg.shared.cast::<T::Shared>()) });
    }
}

/// `rdma_link_ops.newlink`: `rdma link add NAME type TYPE netdev DEV`.
///
/// # Safety
///
/// Called by the RDMA core with a valid name and a held netdev reference.
unsafe extern "C" fn newlink_callback(name: *const c_char, ndev: *mut b::net_device) -> c_int {
    from_result(|| {
        let reg = REGISTRY.load(Ordering::Acquire);
        if reg.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: `REGISTRY` is only non-null while the registry lives, and
        // `Drop` unregisters the link ops (waiting for this call) first.
        let reg = unsafe { &*reg };
        // SAFETY: the core passes a NUL-terminated name and a netdev it holds
        // for the duration of the call.
        let (name, netdev) = unsafe { (CStr::from_char_ptr(name), NetDev::from_raw(ndev)) };
        (reg.newlink)(reg, name, &netdev)?;
        Ok(0)
    })
}

/// The netdev notifier: ports follow their netdev.
///
/// # Safety
///
/// Called by the netdev notifier chain with our `notifier_block` and a
/// `netdev_notifier_info`.
unsafe extern "C" fn netdev_event_callback(
    nb: *mut b::notifier_block,
    event: c_ulong,
    ptr: *mut c_void,
) -> c_int {
    // SAFETY: `nb` is the `notifier` field of a pinned `Registry`, which
    // unregisters it before it is freed; `Opaque` is `repr(transparent)`.
    let reg = unsafe {
        &*kernel::container_of!(nb.cast::<Opaque<b::notifier_block>>(), Registry, notifier)
    };
    if reg.unloading.load(Ordering::Acquire) {
        return b::NOTIFY_DONE as c_int;
    }
    // SAFETY: the chain passes a `netdev_notifier_info` for netdev events.
    let ndev = unsafe { b::metaroce_netdev_notifier_info_to_dev(ptr) };
    let event = event as u32;

    // Every device hears of every netdev's state (planes: `Driver::netdev_event`),
    // for the netdevs of the initial namespace only: an ifindex names a netdev
    // within its namespace, and another namespace's netdev 3 is not plane 3.
    // SAFETY: the chain's netdev is registered during the call.
    let in_init_net = unsafe { b::metaroce_netdev_in_init_net(ndev) };
    if in_init_net
        && matches!(
            event,
            b::netdev_cmd_NETDEV_UP
                | b::netdev_cmd_NETDEV_DOWN
                | b::netdev_cmd_NETDEV_CHANGE
                | b::netdev_cmd_NETDEV_UNREGISTER
        )
    {
        // SAFETY: the chain's netdev is registered during the call.
        let nd = unsafe { NetDev::from_raw(ndev) };
        let (ifindex, up) = (nd.ifindex(), nd.is_up());
        let gone = event == b::netdev_cmd_NETDEV_UNREGISTER;
        let mut held = [ptr::null_mut::<b::ib_device>(); MAX_DEVICES];
        let mut n = 0;
        for e in reg.devices.lock().iter().flatten() {
            // SAFETY: listed devices are alive while we hold the list lock.
            if n < MAX_DEVICES && unsafe { b::metaroce_ib_device_try_get(e.ib) } {
                held[n] = e.ib;
                n += 1;
            }
        }
        for &ib in &held[..n] {
            // SAFETY: a device of this registry's driver, which we hold a
            // reference on (so `dealloc_driver` cannot run) until the `put`.
            unsafe { (reg.netdev_event)(ib, ifindex, up && !gone, gone) };
            // SAFETY: the reference `ib_device_try_get` took.
            unsafe { b::ib_device_put(ib) };
        }
    }

    // Find our device on this netdev and take a reference to it.
    let mut found = None;
    for e in reg.devices.lock().iter().flatten() {
        // SAFETY: listed devices are alive while we hold the list lock.
        if e.netdev == ndev && unsafe { b::metaroce_ib_device_try_get(e.ib) } {
            found = Some(e.ib);
            break;
        }
    }
    let Some(ib) = found else {
        return b::NOTIFY_DONE as c_int;
    };

    match event {
        // SAFETY: we hold a reference on `ib` (until the `put` below).
        b::netdev_cmd_NETDEV_UNREGISTER => unsafe { b::ib_unregister_device_queued(ib) },
        b::netdev_cmd_NETDEV_UP | b::netdev_cmd_NETDEV_DOWN | b::netdev_cmd_NETDEV_CHANGE => {
            // SAFETY: the chain's netdev is registered during the call.
            let up = unsafe { NetDev::from_raw(ndev) }.is_up();
            let mut ev = b::ib_event {
                device: ib,
                event: if up {
                    b::ib_event_type_IB_EVENT_PORT_ACTIVE
                } else {
                    b::ib_event_type_IB_EVENT_PORT_ERR
                },
                ..Default::default()
            };
            ev.element.port_num = 1;
            // SAFETY: we hold a reference on `ib`; the event lives for the
            // call.
            unsafe { b::ib_dispatch_event(&ev) };
        }
        _ => {}
    }
    // SAFETY: the reference `ib_device_try_get` took.
    unsafe { b::ib_device_put(ib) };
    b::NOTIFY_DONE as c_int
}

impl<T: Driver> Adapter<T> {
    /// Tells device `ib` of a netdev's state ([`Driver::netdev_event`]).
    ///
    /// # Safety
    ///
    /// `ib` is a device of driver `T` created by this registration, on which
    /// the caller holds a reference for the call.
    unsafe fn netdev_event(ib: *mut b::ib_device, ifindex: i32, up: bool, gone: bool) {
        // SAFETY: the caller's reference keeps `dealloc_driver` from running.
        let dev = unsafe { super::device::Device::<T>::from_raw(ib) };
        T::netdev_event(dev, ifindex, up, gone);
    }

    /// Creates, lists and registers a device named `name` on `netdev`.
    fn newlink(reg: &Registry, name: &CStr, netdev: &NetDev) -> Result {
        // SAFETY: `reg.shared` came from `Arc::<T::Shared>::into_raw` and is
        // released only after every device is gone. `ManuallyDrop`: this
        // borrows the registry's reference.
        let shared =
            core::mem::ManuallyDrop::new(unsafe { Arc::from_raw(reg.shared.cast::<T::Shared>()) });
        let data = T::new_device(&shared, netdev)?;

        // SAFETY: `_ib_alloc_device` returns a zeroed, initialised `ib_device`
        // at the start of an allocation of the size asked for, or null.
        let ib = unsafe { b::_ib_alloc_device(size_of::<DeviceBox<T::Data>>()) };
        if ib.is_null() {
            return Err(ENOMEM);
        }
        let dbox = ib.cast::<DeviceBox<T::Data>>();
        // SAFETY: `ib` is a fresh allocation large enough for a `DeviceBox`,
        // with `ib_device` at offset 0 (`repr(C)`); nobody else sees it yet.
        unsafe { ptr::write(ptr::addr_of_mut!((*dbox).data), data) };
        // SAFETY: the caller holds the netdev; the device holds its own
        // reference from here to `dealloc_driver`.
        unsafe { b::metaroce_dev_hold(netdev.as_ptr()) };
        // SAFETY: as for `data`.
        unsafe { ptr::write(ptr::addr_of_mut!((*dbox).netdev), netdev.as_ptr()) };
        // SAFETY: as for `data`; the table is a `'static` constant.
        unsafe { ptr::write(ptr::addr_of_mut!((*dbox).ext), &Self::EXT_OPS) };
        // SAFETY: as for `data`: the fresh device is ours alone.
        let dev = unsafe { &mut *ib };
        {
            dev.node_type = b::RDMA_NODE_IB_CA as u8;
            dev.phys_port_cnt = 1;
            dev.local_dma_lkey = 0;
            dev.node_guid = u64::from_ne_bytes(eui64_from_mac(netdev.mac()));
            // The user-space SQ doorbell and CQ arming are plain commands
            // (the core enables the rest by default), as for rxe.
            dev.uverbs_cmd_mask |= 1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND
                | 1u64 << b::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ;
            let desc = T::NODE_DESC.as_bytes_with_nul();
            for (d, s) in dev.node_desc.iter_mut().zip(desc) {
                *d = *s as c_char;
            }
            // SAFETY: plain query, no precondition.
            dev.num_comp_vectors = unsafe { b::metaroce_num_possible_cpus() } as c_int;
        }
        // SAFETY: `ib` is valid; `ib_set_device_ops` copies the table, a
        // `'static` constant.
        unsafe { b::ib_set_device_ops(ib, &Self::OPS) };
        // The module is known at run time only: `ib_set_device_ops` merges
        // a non-null `owner` into the device's table.
        let owner = b::ib_device_ops {
            owner: reg.owner,
            ..Default::default()
        };
        // SAFETY: as above.
        unsafe { b::ib_set_device_ops(ib, &owner) };
        if T::HAS_QP_QUERY_PATHS {
            // SAFETY: `ib` is valid and not yet registered; the method tree
            // is a static of the C shim, whose handlers reach `EXT_OPS`.
            unsafe { b::metaroce_set_uapi(ib) };
        }

        // Check for a device on this netdev and take a slot in one critical
        // section: concurrent `rdma link add`s must not both succeed.
        let listed = {
            let mut devices = reg.devices.lock();
            if devices
                .iter()
                .flatten()
                .any(|e| e.netdev == netdev.as_ptr())
            {
                Err(EEXIST)
            } else if let Some(slot) = devices.iter_mut().find(|slot| slot.is_none()) {
                *slot = Some(Entry {
                    ib,
                    netdev: netdev.as_ptr(),
                });
                Ok(())
            } else {
                Err(ENOSPC)
            }
        };
        if let Err(e) = listed {
            if e == EEXIST {
                pr_err!(
                    "a {} device already runs on {}\n",
                    T::LINK_TYPE,
                    netdev.name()
                );
            } else {
                pr_err!("{}: no room: {} devices at most\n", name, MAX_DEVICES);
            }
            // SAFETY: not registered: the error unwind is ours; it calls our
            // `dealloc_driver`, which drops the data and the netdev reference.
            unsafe { b::ib_dealloc_device(ib) };
            return Err(e);
        }
        // SAFETY: `ib` is valid and not yet registered; `name` is a C string.
        // The netdev is reached through `get_netdev` (see the module docs).
        let ret = unsafe { b::ib_register_device(ib, name.as_char_ptr(), ptr::null_mut()) };
        if ret != 0 {
            pr_err!(
                "registering {} on {} failed: {}\n",
                name,
                netdev.name(),
                ret
            );
            // SAFETY: registration failed: the driver deallocates; our
            // `dealloc_driver` drops the data and unlists the device.
            unsafe { b::ib_dealloc_device(ib) };
            return to_result(ret);
        }
        // A netdev that began to unregister before the device was registered
        // sent its NETDEV_UNREGISTER while the device could not be found: undo.
        // SAFETY: the netdev is held by the caller.
        if !unsafe { b::metaroce_netdev_is_registered(netdev.as_ptr()) } {
            // SAFETY: `ib` is registered and nobody else removes it: a
            // NETDEV_UNREGISTER for this netdev has already been delivered.
            unsafe { b::ib_unregister_device(ib) };
            return Err(ENODEV);
        }
        pr_info!(
            "{}: added on {} (mtu {})\n",
            name,
            netdev.name(),
            netdev.mtu()
        );
        Ok(())
    }

    /// Last call for a device: drop the driver data and unlist it. The RDMA
    /// core frees the memory afterwards.
    ///
    /// # Safety
    ///
    /// Called only by the RDMA core, with a live device created by
    /// [`Self::newlink`].
    pub(super) unsafe extern "C" fn dealloc_driver(ib: *mut b::ib_device) {
        let dbox = ib.cast::<DeviceBox<T::Data>>();
        // SAFETY: `ib` starts a `DeviceBox` whose data was set in `newlink`
        // before any path that reaches `ib_dealloc_device`; nothing uses it
        // after this call.
        unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*dbox).data)) };
        // SAFETY: as above, for the netdev reference `newlink` took.
        unsafe { b::metaroce_dev_put((*dbox).netdev) };
        // Unlist last: module exit returns once the list is empty, so nothing
        // of ours may run after this but the return itself.
        let reg = REGISTRY.load(Ordering::Acquire);
        if !reg.is_null() {
            // SAFETY: the registry outlives all its devices (`Drop` waits
            // for the list to empty before clearing `REGISTRY`).
            let reg = unsafe { &*reg };
            for slot in reg.devices.lock().iter_mut() {
                if slot.is_some_and(|e| e.ib == ib) {
                    *slot = None;
                }
            }
        }
    }
}
